/* Two specials in C: build with
 *   cc -shared -fPIC -I include examples/specials/scale.c -o libscale.so
 * and run with  sial run --specials ./libscale.so examples/specials/scale.sial  */
#include <stdio.h>
#include "sial_special.h"

/* scale_by (u r): block *= factor. */
static int32_t scale_by(sial_arg *args, int32_t nargs, char *message, int32_t message_len) {
    (void)nargs;
    double factor = args[1].data[0];
    if (factor < 0) {
        snprintf(message, (size_t)message_len, "a negative factor (%g)", factor);
        return 2;
    }
    for (int64_t k = 0; k < args[0].len; k++) {
        args[0].data[k] *= factor;
    }
    return 0;
}

/* sum_squares (w r): scalar = sum of the block's squared elements. */
static int32_t sum_squares(sial_arg *args, int32_t nargs, char *message, int32_t message_len) {
    (void)nargs; (void)message; (void)message_len;
    double s = 0;
    for (int64_t k = 0; k < args[1].len; k++) {
        s += args[1].data[k] * args[1].data[k];
    }
    args[0].data[0] = s;
    return 0;
}

static const sial_special table[] = {
    {"scale_by", "ur", scale_by},
    {"sum_squares", "wr", sum_squares},
};

const sial_special *sial_specials_v1(int32_t *count) {
    *count = (int32_t)(sizeof table / sizeof table[0]);
    return table;
}
