! Two specials in Fortran (bind(C), include/sial_special.h): build with
!   gfortran -shared -fPIC examples/specials/scale.f90 -o libscale_f.so
! and run with  sial run --specials ./libscale_f.so examples/specials/scale.sial
module scale_specials
  use iso_c_binding
  implicit none

  type, bind(c) :: sial_arg
     integer(c_int32_t) :: kind, rank
     type(c_ptr) :: name, segments, shape, data
     integer(c_int64_t) :: len
  end type sial_arg

  type, bind(c) :: sial_special
     type(c_ptr) :: name, signature
     type(c_funptr) :: call
  end type sial_special

  type(sial_special), target, save :: table(2)
  character(kind=c_char, len=9), target, save :: scale_name = "scale_by" // c_null_char
  character(kind=c_char, len=3), target, save :: scale_sig = "ur" // c_null_char
  character(kind=c_char, len=12), target, save :: sum_name = "sum_squares" // c_null_char
  character(kind=c_char, len=3), target, save :: sum_sig = "wr" // c_null_char

contains

  ! scale_by (u r): block = block * factor
  integer(c_int32_t) function scale_by(args, nargs, message, message_len) bind(c)
    integer(c_int32_t), value :: nargs, message_len
    type(sial_arg), intent(inout) :: args(nargs)
    character(kind=c_char), intent(inout) :: message(message_len)
    real(c_double), pointer :: block(:), factor(:)
    call c_f_pointer(args(1)%data, block, [args(1)%len])
    call c_f_pointer(args(2)%data, factor, [1_c_int64_t])
    block = block * factor(1)
    scale_by = 0
  end function scale_by

  ! sum_squares (w r): scalar = sum(block**2)
  integer(c_int32_t) function sum_squares(args, nargs, message, message_len) bind(c)
    integer(c_int32_t), value :: nargs, message_len
    type(sial_arg), intent(inout) :: args(nargs)
    character(kind=c_char), intent(inout) :: message(message_len)
    real(c_double), pointer :: total(:), block(:)
    call c_f_pointer(args(1)%data, total, [1_c_int64_t])
    call c_f_pointer(args(2)%data, block, [args(2)%len])
    total(1) = sum(block * block)
    sum_squares = 0
  end function sum_squares

  type(c_ptr) function sial_specials_v1(count) bind(c, name="sial_specials_v1")
    integer(c_int32_t), intent(out) :: count
    table(1) = sial_special(c_loc(scale_name), c_loc(scale_sig), c_funloc(scale_by))
    table(2) = sial_special(c_loc(sum_name), c_loc(sum_sig), c_funloc(sum_squares))
    count = 2
    sial_specials_v1 = c_loc(table)
  end function sial_specials_v1

end module scale_specials
