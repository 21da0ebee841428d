/*
 * Command-line value parsing shared by the subcommands: each parser names the option and says
 * what was expected when the value is bad, in a message the caller prints; and the option tables
 * the subcommands declare their options in (one row an option: its name, the kind of its value,
 * where the value goes, its range), which st_cli_parse (common.h) runs. No printing here.
 */
#ifndef ST_CLI_ARGS_H
#define ST_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Integer in [min, max]. Returns 0 or ST_EUSAGE (message in err). */
int st_arg_u64(const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out,
               char *err, size_t errlen) ST_WUR;
int st_arg_i64(const char *opt, const char *val, int64_t min, int64_t max, int64_t *out, char *err,
               size_t errlen) ST_WUR;
/* Finite number in [min, max]. */
int st_arg_f64(const char *opt, const char *val, double min, double max, double *out, char *err,
               size_t errlen) ST_WUR;
/* One of the NULL-terminated choices; *out is its index. */
int st_arg_choice(const char *opt, const char *val, const char *const *choices, int *out, char *err,
                  size_t errlen) ST_WUR;

struct st_opt;

/* An ST_OPT_FN row's parser: 0 or ST_EUSAGE with the message in err. */
typedef int (*st_opt_fn)(const struct st_opt *opt, const char *v, char *err, size_t errlen);

enum st_opt_kind {
    ST_OPT_K_FLAG = 1, /* no value: *to.i = set */
    ST_OPT_K_STR,      /* *to.s = the value, borrowed from argv */
    ST_OPT_K_U32,      /* integer in [umin, umax] into *to.u32 */
    ST_OPT_K_U64,      /* integer in [umin, umax] into *to.u64 */
    ST_OPT_K_SIZE,     /* integer in [umin, umax] into *to.size */
    ST_OPT_K_I64,      /* integer in [imin, imax] into *to.i64 */
    ST_OPT_K_F64,      /* finite number in [fmin, fmax] (or word: word_f64) into *to.f64 */
    ST_OPT_K_CHOICE,   /* one of choices: *to.i = values[k], or k without values */
    ST_OPT_K_FN,       /* fn(row, value): to.ctx and set are the callback's */
};

/*
 * One option of a table; a table ends in a row without flag. Every pointer is borrowed and
 * outlives the parse. The extras (given, mark, label, refuse) apply to every kind.
 */
struct st_opt {
    const char *flag; /* "--name", as the user types it */
    enum st_opt_kind kind;
    union {
        int *i;
        const char **s;
        uint32_t *u32;
        uint64_t *u64;
        size_t *size;
        int64_t *i64;
        double *f64;
        void *ctx;
    } to;
    uint64_t umin, umax;
    int64_t imin, imax;
    double fmin, fmax;
    const char *word; /* ST_OPT_K_F64: a word that stands for word_f64 (e.g. "max") */
    double word_f64;
    int set;
    const char *const *choices; /* NULL-terminated */
    const int *values;
    st_opt_fn fn;
    int *given;         /* set to 1 when the option is given */
    const char **mark;  /* set to flag when the option is given */
    const char *label;  /* the name in messages instead of flag (an alias) */
    const char *refuse; /* the option is refused with this message, its value unread */
};

/* Row heads, as the first fields of a row: {ST_OPT_U64("--n", &n, 1, 10), .given = &have_n}. */
#define ST_OPT_FLAG(f, dst, v) .flag = (f), .kind = ST_OPT_K_FLAG, .to.i = (dst), .set = (v)
#define ST_OPT_STR(f, dst) .flag = (f), .kind = ST_OPT_K_STR, .to.s = (dst)
#define ST_OPT_CHOICE(f, dst, names, vals)                                                         \
    .flag = (f), .kind = ST_OPT_K_CHOICE, .to.i = (dst), .choices = (names), .values = (vals)
#define ST_OPT_FN(f, func, c) .flag = (f), .kind = ST_OPT_K_FN, .fn = (func), .to.ctx = (c)
/* A number in [lo, hi]: kind k, destination member m, range fields mn and mx. */
#define ST_OPT_NUM(k, m, mn, mx, f, dst, lo, hi)                                                   \
    .flag = (f), .kind = (k), .to.m = (dst), .mn = (lo), .mx = (hi)
#define ST_OPT_U32(f, d, lo, hi) ST_OPT_NUM(ST_OPT_K_U32, u32, umin, umax, f, d, lo, hi)
#define ST_OPT_U64(f, d, lo, hi) ST_OPT_NUM(ST_OPT_K_U64, u64, umin, umax, f, d, lo, hi)
#define ST_OPT_SIZE(f, d, lo, hi) ST_OPT_NUM(ST_OPT_K_SIZE, size, umin, umax, f, d, lo, hi)
#define ST_OPT_I64(f, d, lo, hi) ST_OPT_NUM(ST_OPT_K_I64, i64, imin, imax, f, d, lo, hi)
#define ST_OPT_F64(f, d, lo, hi) ST_OPT_NUM(ST_OPT_K_F64, f64, fmin, fmax, f, d, lo, hi)

/* The name messages give the option: label, else flag. */
const char *st_opt_name(const struct st_opt *opt);
/* Rows of table before its end. */
size_t st_opt_count(const struct st_opt *table);
/* The row of table whose flag is flag, or NULL. */
struct st_opt *st_opt_find(struct st_opt *table, const char *flag);
/*
 * Applies one occurrence of opt with value v (NULL for a flag): marks it given, refuses it, or
 * parses v into its destination. Returns 0 or ST_EUSAGE (message in err; a value out of range
 * names the option and the range, as the st_arg_* parsers do).
 */
int st_opt_apply(const struct st_opt *opt, const char *v, char *err, size_t errlen) ST_WUR;

#endif
