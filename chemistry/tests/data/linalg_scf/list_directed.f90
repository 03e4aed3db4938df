! gfortran list-directed output of the warning ACES4's gen_eigen_calc prints; the output
! is pasted into the list_directed_* test of linalg.rs. Run: gfortran list_directed.f90 && ./a.out
program t
  integer :: k
  k = 3
  print *, 'WARNING complex component from DGEEV', k, 1.5d0
  print *, 'WARNING complex component from DGEEV', k, 0.1d0
  print *, 'WARNING complex component from DGEEV', k, 123456.789d0
  print *, 'WARNING complex component from DGEEV', k, 1.0d16
  print *, 'WARNING complex component from DGEEV', k, 1.0d17
  print *, 'WARNING complex component from DGEEV', k, 2.0d-3
  print *, 'WARNING complex component from DGEEV', k, -7.25d0
  print *, 'WARNING complex component from DGEEV', k, 0.0d0
end program
