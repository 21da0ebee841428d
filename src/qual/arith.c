/*
 * Arithmetic word problems and the final-integer verifier (see arith.h). The generator draws
 * every number from st_rng so a seed fixes the text; constraints that keep the answer exact
 * (divisibility, positive remainders) are met by construction, never by retrying.
 */
#include "qual/arith.h"

#include <stdio.h>
#include <string.h>

#include "base/rng.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const names[] = {"Ana",  "Ben",    "Chen",  "Dara",
                                    "Emil", "Fatima", "Goran", "Hana"};
static const char *const goods[] = {"books", "cans", "light bulbs", "jars", "bottles", "toys"};
static const char *const parts[] = {"widgets", "valves", "gears", "springs", "bolts", "hinges"};
static const char *const fruit[] = {"apples", "pears", "oranges", "plums", "peaches", "lemons"};

static const char *const tmpl_names[] = {"warehouse", "factory", "shop", "train", "orchard"};

static const char instruction[] =
    " Give the final answer as a whole number on the last line, in the form \"Answer: N\".";

/* Uniform integer in [lo, hi]; lo <= hi. */
static int64_t pick(struct st_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)st_rng_below(r, (uint64_t)(hi - lo + 1));
}

static const char *pick_word(struct st_rng *r, const char *const *words, size_t n)
{
    return words[st_rng_below(r, n)];
}

static void set_ops(struct st_arith *p, const int64_t *ops, int n)
{
    for (int i = 0; i < n; i++) {
        p->ops[i] = ops[i];
    }
    p->nops = n;
}

static void make_warehouse(struct st_rng *r, struct st_arith *p)
{
    int64_t a = pick(r, 20, 99), b = pick(r, 12, 48);
    int64_t c = pick(r, 5, a - 5), d = pick(r, 10, 60), e = pick(r, 3, 2 * b);
    const char *what = pick_word(r, goods, COUNT(goods));
    snprintf(p->text, sizeof(p->text),
             "A warehouse has %lld boxes with %lld %s in each box. It ships out %lld full boxes, "
             "then receives %lld more boxes with %lld %s each. Finally %lld single %s are found "
             "damaged and thrown away. How many %s are in the warehouse now?%s",
             (long long)a, (long long)b, what, (long long)c, (long long)d, (long long)b, what,
             (long long)e, what, what, instruction);
    int64_t ops[] = {a, b, c, d, e};
    set_ops(p, ops, 5);
    p->steps = 4;
    p->answer = (a - c + d) * b - e;
}

static void make_factory(struct st_rng *r, struct st_arith *p)
{
    int64_t rate = pick(r, 15, 90), hours = pick(r, 6, 12), days = pick(r, 3, 9);
    int64_t crate = pick(r, 12, 40);
    int64_t total = rate * hours * days;
    /* Rejects make the rest an exact number of crates: total mod crate plus whole crates. */
    int64_t rejects = total % crate + crate * pick(r, total % crate == 0 ? 1 : 0, 3);
    const char *what = pick_word(r, parts, COUNT(parts));
    snprintf(p->text, sizeof(p->text),
             "A factory makes %lld %s per hour. It runs %lld hours a day for %lld days. At the "
             "end, %lld of the %s fail inspection and are scrapped. The rest are packed into "
             "crates of exactly %lld, with no crate left partly filled. How many crates are "
             "packed?%s",
             (long long)rate, what, (long long)hours, (long long)days, (long long)rejects, what,
             (long long)crate, instruction);
    int64_t ops[] = {rate, hours, days, rejects, crate};
    set_ops(p, ops, 5);
    p->steps = 4;
    p->answer = (total - rejects) / crate;
}

static void make_shop(struct st_rng *r, struct st_arith *p)
{
    int64_t nb = pick(r, 5, 30), pb = pick(r, 3, 12), np = pick(r, 4, 25), pp = pick(r, 2, 9);
    int64_t earn = pick(r, 50, 400);
    int64_t money = nb * pb + np * pp + pick(r, 100, 1500);
    const char *who = pick_word(r, names, COUNT(names));
    snprintf(p->text, sizeof(p->text),
             "%s has %lld dollars. %s buys %lld notebooks at %lld dollars each and %lld pens at "
             "%lld dollars each. Later %s earns %lld dollars for helping at a market. How many "
             "dollars does %s have now?%s",
             who, (long long)money, who, (long long)nb, (long long)pb, (long long)np, (long long)pp,
             who, (long long)earn, who, instruction);
    int64_t ops[] = {money, nb, pb, np, pp, earn};
    set_ops(p, ops, 6);
    p->steps = 5;
    p->answer = money - nb * pb - np * pp + earn;
}

static void make_train(struct st_rng *r, struct st_arith *p)
{
    int64_t wagons = pick(r, 6, 14), seats = pick(r, 40, 80);
    int64_t cap = wagons * seats;
    int64_t board1 = pick(r, 100, cap / 2), leave = pick(r, 10, board1 / 2);
    int64_t board2 = pick(r, 20, cap / 3);
    snprintf(p->text, sizeof(p->text),
             "An empty train has %lld wagons with %lld seats in each wagon. At the first station "
             "%lld passengers get on. At the second station %lld passengers get off and %lld get "
             "on. Every passenger takes one seat. How many seats are empty after the second "
             "station?%s",
             (long long)wagons, (long long)seats, (long long)board1, (long long)leave,
             (long long)board2, instruction);
    int64_t ops[] = {wagons, seats, board1, leave, board2};
    set_ops(p, ops, 5);
    p->steps = 4;
    p->answer = cap - (board1 - leave + board2);
}

static void make_orchard(struct st_rng *r, struct st_arith *p)
{
    int64_t rows = pick(r, 8, 30), trees = pick(r, 10, 40), bag = pick(r, 5, 12);
    int64_t per_tree = bag * pick(r, 3, 15), price = pick(r, 2, 9);
    const char *what = pick_word(r, fruit, COUNT(fruit));
    snprintf(p->text, sizeof(p->text),
             "An orchard has %lld rows of %lld trees. Each tree gives %lld %s. All the %s are "
             "sold in bags of %lld, and each bag sells for %lld dollars. How many dollars does "
             "the orchard earn?%s",
             (long long)rows, (long long)trees, (long long)per_tree, what, what, (long long)bag,
             (long long)price, instruction);
    int64_t ops[] = {rows, trees, per_tree, bag, price};
    set_ops(p, ops, 5);
    p->steps = 4;
    p->answer = rows * trees * per_tree / bag * price;
}

void st_arith_make_tmpl(uint64_t seed, enum st_arith_template tmpl, struct st_arith *p)
{
    struct st_rng r;
    /* Out of range is a caller bug; wrap rather than read past the table. */
    tmpl = (enum st_arith_template)((unsigned)tmpl % ST_ARITH_TEMPLATES);
    memset(p, 0, sizeof(*p));
    /* Mixed with the template so that one seed gives unrelated numbers in each template. */
    st_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ull * ((uint64_t)tmpl + 1)));
    p->seed = seed;
    p->tmpl = tmpl;
    static void (*const make[ST_ARITH_TEMPLATES])(struct st_rng *, struct st_arith *) = {
        [ST_ARITH_WAREHOUSE] = make_warehouse, [ST_ARITH_FACTORY] = make_factory,
        [ST_ARITH_SHOP] = make_shop,           [ST_ARITH_TRAIN] = make_train,
        [ST_ARITH_ORCHARD] = make_orchard,
    };
    make[tmpl](&r, p);
}

void st_arith_make(uint64_t seed, struct st_arith *p)
{
    st_arith_make_tmpl(seed, (enum st_arith_template)(seed % ST_ARITH_TEMPLATES), p);
}

const char *st_arith_tmpl_name(enum st_arith_template tmpl)
{
    if ((unsigned)tmpl >= COUNT(tmpl_names)) {
        return "?";
    }
    return tmpl_names[tmpl];
}

/* ---- the verifier ---- */

struct num {
    size_t start, end; /* the number's bytes, sign included */
    int64_t v;
    int frac;  /* a non-zero fraction follows */
    int range; /* more than 18 digits */
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Reads the number whose first digit is at t[i]; a '-' just before it (not after a letter or a
 * digit, so "3-5" stays two positive numbers) makes it negative. */
static void read_number(const char *t, size_t n, size_t i, struct num *out)
{
    memset(out, 0, sizeof(*out));
    int neg = i > 0 && t[i - 1] == '-' && (i < 2 || (!is_alpha(t[i - 2]) && !is_digit(t[i - 2])));
    out->start = neg ? i - 1 : i;
    uint64_t v = 0;
    int digits = 0;
    size_t j = i;
    for (;;) {
        while (j < n && is_digit(t[j])) {
            if (digits > 0 || t[j] != '0') {
                digits++;
            }
            if (digits <= 18) {
                v = v * 10 + (uint64_t)(t[j] - '0');
            }
            j++;
        }
        /* A thousands group: ',' and exactly three digits. */
        if (j + 3 < n && t[j] == ',' && is_digit(t[j + 1]) && is_digit(t[j + 2]) &&
            is_digit(t[j + 3]) && (j + 4 >= n || !is_digit(t[j + 4]))) {
            j++;
            continue;
        }
        break;
    }
    if (j + 1 < n && t[j] == '.' && is_digit(t[j + 1])) {
        j++;
        while (j < n && is_digit(t[j])) {
            out->frac |= t[j] != '0';
            j++;
        }
    }
    out->end = j;
    out->range = digits > 18;
    out->v = neg ? -(int64_t)v : (int64_t)v;
}

/* The first number starting in t[from, to), or 0 when none. */
static int first_number(const char *t, size_t n, size_t from, size_t to, struct num *out)
{
    for (size_t i = from; i < to && i < n; i++) {
        if (is_digit(t[i])) {
            read_number(t, n, i, out);
            return 1;
        }
    }
    return 0;
}

static int match_ci(const char *t, size_t n, size_t i, const char *word)
{
    size_t k = strlen(word);
    if (i + k > n) {
        return 0;
    }
    for (size_t j = 0; j < k; j++) {
        if (lower(t[i + j]) != word[j]) {
            return 0;
        }
    }
    return 1;
}

static size_t skip_set(const char *t, size_t n, size_t i, const char *set)
{
    while (i < n && t[i] != '\0' && strchr(set, t[i]) != NULL) {
        i++;
    }
    return i;
}

/* "answer" at i, then markup, then ':' '=' or "is", then markup and the number. */
static int after_answer(const char *t, size_t n, size_t i, struct num *out)
{
    static const char markup[] = " \t*_#";
    size_t j = i + 6;
    if (j < n && is_alpha(t[j])) {
        return 0; /* "answers", "answered" */
    }
    j = skip_set(t, n, j, markup);
    if (j < n && (t[j] == ':' || t[j] == '=')) {
        j++;
    } else if (match_ci(t, n, j, "is") && (j + 2 >= n || !is_alpha(t[j + 2]))) {
        j = skip_set(t, n, j + 2, ":");
    } else {
        return 0;
    }
    j = skip_set(t, n, j, " \t\r\n*_$");
    if (match_ci(t, n, j, "\\boxed{")) {
        j = skip_set(t, n, j + 7, " $");
    }
    if (j < n && t[j] == '-' && j + 1 < n && is_digit(t[j + 1])) {
        j++;
    }
    if (j >= n || !is_digit(t[j])) {
        return 0;
    }
    read_number(t, n, j, out);
    return 1;
}

static int find_answer_marker(const char *t, size_t n, size_t from, struct num *out)
{
    for (size_t i = n; i-- > from;) {
        if (lower(t[i]) == 'a' && match_ci(t, n, i, "answer") && after_answer(t, n, i, out)) {
            return 1;
        }
    }
    return 0;
}

static int find_boxed(const char *t, size_t n, size_t from, struct num *out)
{
    for (size_t i = n; i-- > from;) {
        if (t[i] == '\\' && match_ci(t, n, i, "\\boxed{")) {
            size_t j = skip_set(t, n, i + 7, " $");
            size_t close = j;
            while (close < n && t[close] != '}') {
                close++;
            }
            if (j < n && is_digit(t[j]) && first_number(t, n, j, close, out)) {
                return 1;
            }
        }
    }
    return 0;
}

/* The last **...** span (pairs counted from the start) that begins with a number. */
static int find_bold(const char *t, size_t n, size_t from, struct num *out)
{
    int found = 0;
    size_t open = 0;
    int in = 0;
    for (size_t i = from; i + 1 < n; i++) {
        if (t[i] != '*' || t[i + 1] != '*') {
            continue;
        }
        if (!in) {
            open = i + 2;
        } else {
            size_t j = skip_set(t, n, open, " $");
            struct num cand;
            if (j < i && is_digit(t[j])) {
                read_number(t, n, j, &cand);
                *out = cand;
                found = 1;
            }
        }
        in = !in;
        i++;
    }
    return found;
}

static int find_last(const char *t, size_t n, size_t from, struct num *out)
{
    int found = 0;
    for (size_t i = from; i < n; i++) {
        if (is_digit(t[i])) {
            read_number(t, n, i, out);
            found = 1;
            i = out->end > i ? out->end - 1 : i;
        }
    }
    return found;
}

static size_t after_think(const char *t, size_t n)
{
    static const char tag[] = "</think>";
    size_t k = sizeof(tag) - 1;
    for (size_t i = n; i >= k; i--) {
        if (memcmp(t + i - k, tag, k) == 0) {
            return i;
        }
    }
    return 0;
}

int st_arith_extract(const char *text, size_t len, int64_t *out)
{
    struct num x;
    size_t from = after_think(text, len);
    *out = 0;
    if (!find_answer_marker(text, len, from, &x) && !find_boxed(text, len, from, &x) &&
        !find_bold(text, len, from, &x) && !find_last(text, len, from, &x)) {
        return ST_ENOTFOUND;
    }
    if (x.range) {
        return -ERANGE;
    }
    if (x.frac) {
        return ST_EPARSE;
    }
    *out = x.v;
    return 0;
}

int st_arith_check(const struct st_arith *p, const char *text, size_t len, int64_t *got)
{
    int64_t v = 0;
    int rc = st_arith_extract(text, len, &v);
    if (got) {
        *got = rc == 0 ? v : 0;
    }
    return rc == 0 && v == p->answer;
}
