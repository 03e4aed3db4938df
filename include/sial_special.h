/*
 * sial_special.h: the C interface of super instructions ("specials") that `sial run` loads
 * from a shared library at run time (`sial run --specials libmine.so prog.sial`), written in C,
 * Fortran (bind(C)) or Rust. Version 1.
 *
 * A library exports one function, `sial_specials_v1`, that returns its table of specials. Each
 * entry names a special as SIAL programs call it (`execute NAME args`; names are matched without
 * regard to case), gives its signature and the function to call:
 *
 *   - signature: one letter per argument, as in the program's `special NAME SIG` declaration:
 *     'r' read, 'w' written (zero-filled before the call), 'u' read and updated. sial checks the
 *     number of arguments of every call against it, and copies 'w' and 'u' arguments back.
 *   - call: gets the arguments (by value: its own copies, valid for the call only) and a buffer
 *     for a message; returns 0, or any other value for an error, which ends the run with
 *     "special NAME (library PATH) failed with code N: MESSAGE" at the program line.
 *
 * Data is column-major (the first index fastest), 64-bit IEEE doubles. The table and the strings
 * it points to must live as long as the library is loaded (static data).
 */
#ifndef SIAL_SPECIAL_H
#define SIAL_SPECIAL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIAL_SPECIAL_ABI_VERSION 1

/* What an argument is. */
enum sial_arg_kind {
    SIAL_ARG_BLOCK = 0,       /* a block a[i,j] (or a region of a contiguous array) */
    SIAL_ARG_SCALAR = 1,      /* a scalar variable: one element; written back for 'w'/'u' */
    SIAL_ARG_WHOLE_ARRAY = 2, /* a static or contiguous array named without indices */
    SIAL_ARG_LITERAL = 3      /* a number written in the program: one element, read only */
};

typedef struct sial_arg {
    int32_t kind;             /* enum sial_arg_kind */
    int32_t rank;             /* number of dimensions (0 for scalars and literals) */
    const char *name;         /* array or scalar name, NUL-terminated ("" for literals) */
    const int32_t *segments;  /* a block's segment number per dimension; NULL otherwise */
    const int64_t *shape;     /* extent per dimension (rank entries); NULL for rank 0 */
    double *data;             /* the elements, column-major */
    int64_t len;              /* number of elements */
} sial_arg;

/* A special. `message` holds `message_len` bytes: write a NUL-terminated text there to say
 * what went wrong when returning non-zero. */
typedef int32_t (*sial_special_fn)(sial_arg *args, int32_t nargs, char *message,
                                   int32_t message_len);

typedef struct sial_special {
    const char *name;         /* NUL-terminated */
    const char *signature;    /* NUL-terminated, one of 'r', 'w', 'u' per argument */
    sial_special_fn call;
} sial_special;

/* Exported by the library: its table of specials and (in *count) their number. */
const sial_special *sial_specials_v1(int32_t *count);

#ifdef __cplusplus
}
#endif

#endif /* SIAL_SPECIAL_H */
