/*
 * The always-on assertion of the simulator and its engine model: an impossible state (a bug in
 * the caller or in the model, never an input error) aborts at once, in every build type, so that a
 * wrong figure can never come out of a broken invariant. Header only.
 */
#ifndef ST_SIM_MODEL_ASSERT_H
#define ST_SIM_MODEL_ASSERT_H

#include <stdlib.h>

#define ST_MODEL_ASSERT(cond)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
