/*
 * Corpora: the built-in prose generator and user text (plain or JSONL). See corpus.h.
 *
 * The generator writes paragraphs of 3 to 7 sentences, each from one of a dozen sentence shapes
 * whose slots are filled from word lists by a seeded st_rng (integer draws only, so the bytes are
 * the same on every platform). Slots are many and lists long, so a passage of more than a few
 * words never repeats by chance: windows cut from different offsets share no prefix. The words are
 * common English of 2 to 10 letters, so a BPE tokenizer sees about one token a word, near the
 * 4.2 characters a token of real English prose. Pure.
 */
#include "workload/corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/json.h"
#include "base/rng.h"
#include "base/xalloc.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const nouns[] = {
    "river",     "market",   "window",     "garden",   "letter",      "station",    "village",
    "doctor",    "captain",  "harbour",    "island",   "kitchen",     "library",    "mountain",
    "teacher",   "farmer",   "stranger",   "brother",  "sister",      "mother",     "father",
    "child",     "house",    "road",       "bridge",   "forest",      "field",      "city",
    "ship",      "train",    "story",      "book",     "song",        "voice",      "door",
    "table",     "lamp",     "question",   "answer",   "reason",      "machine",    "engine",
    "signal",    "morning",  "evening",    "winter",   "summer",      "storm",      "rain",
    "wind",      "fire",     "stone",      "wall",     "tower",       "church",     "school",
    "office",    "shop",     "street",     "hill",     "lake",        "coast",      "valley",
    "horse",     "dog",      "bird",       "boat",     "carriage",    "clock",      "map",
    "paper",     "coin",     "key",        "box",      "coat",        "glass",      "bottle",
    "cup",       "bread",    "river bank", "corner",   "garden gate", "king",       "queen",
    "soldier",   "sailor",   "painter",    "merchant", "lawyer",      "neighbour",  "friend",
    "guest",     "servant",  "priest",     "judge",    "clerk",       "letter box", "candle",
    "mirror",    "picture",  "chair",      "bed",      "room",        "stair",      "roof",
    "cellar",    "yard",     "fence",      "well",     "mill",        "farm",       "barn",
    "meadow",    "orchard",  "path",       "gate",     "square",      "hall",       "court",
    "prison",    "hospital", "theatre",    "museum",   "factory",     "company",    "government",
    "newspaper", "journey",
};

static const char *const plurals[] = {
    "rivers",   "markets",   "windows",  "gardens",  "letters",   "stations", "villages",
    "doctors",  "islands",   "teachers", "farmers",  "strangers", "houses",   "roads",
    "bridges",  "fields",    "ships",    "trains",   "stories",   "books",    "songs",
    "voices",   "doors",     "tables",   "lamps",    "questions", "answers",  "reasons",
    "machines", "signals",   "stones",   "walls",    "towers",    "horses",   "dogs",
    "birds",    "boats",     "clocks",   "maps",     "papers",    "coins",    "keys",
    "boxes",    "coats",     "glasses",  "bottles",  "cups",      "soldiers", "sailors",
    "painters", "merchants", "friends",  "guests",   "servants",  "candles",  "pictures",
    "chairs",   "rooms",     "fences",   "farms",    "paths",     "gates",    "children",
    "men",      "women",     "workers",  "visitors", "students",  "officers", "neighbours",
    "hours",    "days",
};

static const char *const adjectives[] = {
    "old",       "young",    "small",    "large",   "quiet",    "bright",   "dark",    "cold",
    "warm",      "distant",  "ancient",  "gentle",  "hidden",   "ordinary", "patient", "rapid",
    "simple",    "steady",   "strange",  "useful",  "narrow",   "broad",    "heavy",   "light",
    "empty",     "crowded",  "silent",   "careful", "tired",    "curious",  "famous",  "forgotten",
    "broken",    "golden",   "silver",   "wooden",  "red",      "green",    "grey",    "white",
    "black",     "blue",     "pale",     "proud",   "honest",   "clever",   "foolish", "poor",
    "rich",      "sudden",   "slow",     "long",    "short",    "early",    "late",    "familiar",
    "uncertain", "faithful", "restless", "serious", "cheerful", "lonely",   "public",  "private",
};

static const char *const verbs_t[] = {
    "opened",     "closed",   "carried",   "found",    "watched",  "followed",   "noticed",
    "crossed",    "gathered", "counted",   "answered", "believed", "remembered", "described",
    "repaired",   "built",    "painted",   "wrote",    "read",     "sold",       "bought",
    "lost",       "kept",     "left",      "reached",  "visited",  "studied",    "measured",
    "questioned", "admired",  "ignored",   "prepared", "received", "returned",   "covered",
    "cleaned",    "examined", "explained", "finished", "moved",    "pushed",     "pulled",
    "raised",     "lowered",  "signed",    "sent",     "took",     "held",
};

static const char *const verbs_i[] = {
    "waited",      "walked",
    "laughed",     "listened",
    "arrived",     "departed",
    "slept",       "worked",
    "hesitated",   "smiled",
    "sighed",      "paused",
    "returned",    "stayed",
    "wandered",    "turned",
    "spoke",       "agreed",
    "trembled",    "vanished",
    "stood",       "sat",
    "knelt",       "rested",
    "travelled",   "listened carefully",
    "looked away", "went on",
    "came back",   "fell silent",
};

static const char *const adverbs[] = {
    "quietly",        "slowly",    "carefully", "suddenly", "patiently",   "gladly",
    "often",          "rarely",    "again",     "at once",  "for a while", "in silence",
    "without a word", "at last",   "once more", "almost",   "already",     "still",
    "perhaps",        "certainly", "briefly",   "early",    "late",
};

static const char *const preps[] = {
    "across",  "behind", "near",  "under",   "beside", "toward",  "through",
    "along",   "beyond", "into",  "over",    "past",   "around",  "inside",
    "outside", "above",  "below", "between", "from",   "against",
};

static const char *const conjs[] = {
    "because", "although", "while", "when", "until", "after", "before", "since", "as if",
};

static const char *const names[] = {
    "Anna",    "Thomas",  "Margaret", "Henry",  "Clara",  "Edward",  "Lucy",     "Robert",
    "Helen",   "Arthur",  "Alice",    "George", "Emily",  "Walter",  "Mary",     "Samuel",
    "Eleanor", "Charles", "Grace",    "Daniel", "Martha", "William", "Ruth",     "Joseph",
    "Harriet", "Frank",   "Louisa",   "Albert", "Sophia", "James",   "Beatrice", "Oliver",
};

static const char *const places[] = {
    "Lisbon", "Bristol", "Vienna",  "Dublin", "Genoa",   "Bergen",  "Leeds",
    "Lyon",   "Porto",   "Hamburg", "Naples", "Oxford",  "Seville", "Antwerp",
    "Geneva", "Krakow",  "Toledo",  "Bath",   "Utrecht", "Riga",
};

static const char *const speech[] = {
    "said", "asked", "replied", "whispered", "answered", "called", "added", "admitted",
};

static const char *const numbers[] = {
    "two", "three",  "four",   "five",      "six",     "seven", "eight", "nine",
    "ten", "twelve", "twenty", "a hundred", "several", "a few", "many",  "some",
};

/* Appends a random entry of a word list; the list is passed with its length. */
static void word(struct st_buf *b, struct st_rng *r, const char *const *list, size_t n)
{
    st_buf_puts(b, list[st_rng_below(r, n)]);
}

#define W(b, r, list) word(b, r, list, N(list))

/* "the" or "a"/"an" before a noun phrase that starts with the next word drawn. */
static void noun_phrase(struct st_buf *b, struct st_rng *r)
{
    uint64_t k = st_rng_below(r, 10);
    if (k < 5) {
        st_buf_puts(b, "the ");
    } else if (k < 7) {
        st_buf_puts(b, "his ");
    } else if (k < 8) {
        st_buf_puts(b, "her ");
    } else {
        st_buf_puts(b, "their ");
    }
    if (st_rng_below(r, 3) == 0) {
        W(b, r, adjectives);
        st_buf_putc(b, ' ');
    }
    W(b, r, nouns);
}

static void subject(struct st_buf *b, struct st_rng *r)
{
    uint64_t k = st_rng_below(r, 4);
    if (k == 0) {
        W(b, r, names);
    } else if (k == 1) {
        st_buf_puts(b, "The ");
        W(b, r, adjectives);
        st_buf_putc(b, ' ');
        W(b, r, nouns);
    } else if (k == 2) {
        st_buf_puts(b, "The ");
        W(b, r, nouns);
    } else {
        st_buf_puts(b, st_rng_below(r, 2) ? "She" : "He");
    }
}

/* The word lists a sentence form names by letter after '%'. */
static const struct {
    char code;
    const char *const *list;
    size_t n;
} slots[] = {
    {'t', verbs_t, N(verbs_t)}, {'i', verbs_i, N(verbs_i)},       {'a', adverbs, N(adverbs)},
    {'p', preps, N(preps)},     {'c', conjs, N(conjs)},           {'m', names, N(names)},
    {'w', places, N(places)},   {'q', speech, N(speech)},         {'u', numbers, N(numbers)},
    {'o', nouns, N(nouns)},     {'j', adjectives, N(adjectives)}, {'l', plurals, N(plurals)},
};

/* Sentence forms: text as written, and '%' slots filled left to right, each drawing from the
 * generator as it comes: %s a subject, %n a noun phrase, %P a preposition with a capital, %y a
 * year (1820-1999), or a word of the list slots[] names. */
static const char *const forms[] = {
    "%s %t %n %p %n.",
    "%s %i %a %p %n.",
    "%P %n, %m %t %n, %c %n %i.",
    "\"I %t %n %a,\" %q %m.",
    "It was a %j %o, and %n %i %a.",
    "In %y, %m travelled to %w with %n.",
    "There were %u %j %l %p %n.",
    "%m and %m %t %n %a.",
    "Nobody knew why %n had %i so %a.",
    "Did %m remember %n in %w?",
    "%s had never seen so many %j %l, %c %m %i.",
    "When %n %i, %m %t %n and %i.",
};

/* Fills one slot of a sentence form. */
static void slot(struct st_buf *b, struct st_rng *r, char code)
{
    if (code == 's') {
        subject(b, r);
    } else if (code == 'n') {
        noun_phrase(b, r);
    } else if (code == 'P') {
        const char *p = preps[st_rng_below(r, N(preps))];
        st_buf_putc(b, (char)(p[0] - 'a' + 'A'));
        st_buf_puts(b, p + 1);
    } else if (code == 'y') {
        st_buf_printf(b, "%u", (unsigned)(1820 + st_rng_below(r, 180)));
    } else {
        for (size_t i = 0; i < N(slots); i++) {
            if (slots[i].code == code) {
                word(b, r, slots[i].list, slots[i].n);
            }
        }
    }
}

/* One sentence, ending with its punctuation and no trailing space. */
static void sentence(struct st_buf *b, struct st_rng *r)
{
    for (const char *f = forms[st_rng_below(r, N(forms))]; *f; f++) {
        if (*f == '%' && f[1]) {
            slot(b, r, *++f);
        } else {
            st_buf_putc(b, *f);
        }
    }
}

static void set_id(struct st_corpus *c, const char *id)
{
    size_t n = strlen(id);
    if (n >= sizeof(c->id)) {
        n = sizeof(c->id) - 1;
    }
    memcpy(c->id, id, n);
    c->id[n] = '\0';
}

void st_corpus_builtin(struct st_corpus *c, uint64_t seed, size_t nbytes)
{
    struct st_rng r;
    struct st_buf b;
    memset(c, 0, sizeof(*c));
    st_buf_init(&b);
    st_buf_reserve(&b, nbytes + 512);
    st_rng_seed(&r, seed ^ 0x636f72707573ull);
    while (b.len < nbytes) {
        uint64_t sentences = 3 + st_rng_below(&r, 5);
        for (uint64_t i = 0; i < sentences; i++) {
            sentence(&b, &r);
            st_buf_putc(&b, i + 1 < sentences ? ' ' : '\n');
        }
        st_buf_putc(&b, '\n');
    }
    /* ASCII only, so cutting at nbytes leaves valid UTF-8. */
    b.len = nbytes;
    c->text = st_buf_take(&b);
    c->text[nbytes] = '\0';
    c->len = nbytes;
    c->hash = st_hash64(c->text, c->len);
    snprintf(c->id, sizeof(c->id), "builtin:%llu", (unsigned long long)seed);
}

int st_corpus_from_text(struct st_corpus *c, const char *id, const char *text, size_t len)
{
    memset(c, 0, sizeof(*c));
    if (!st_utf8_valid(text, len)) {
        return ST_EUTF8;
    }
    c->text = st_xmalloc(len + 1);
    memcpy(c->text, text, len);
    c->text[len] = '\0';
    c->len = len;
    c->hash = st_hash64(c->text, c->len);
    set_id(c, id);
    return 0;
}

static int line_error(char *err, size_t errlen, const char *id, uint64_t line, const char *what)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s:%llu: %s", id, (unsigned long long)line, what);
    }
    return ST_EPARSE;
}

static int is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') {
            return 0;
        }
    }
    return 1;
}

int st_corpus_from_jsonl(struct st_corpus *c, const char *id, const char *jsonl, size_t len,
                         char *err, size_t errlen)
{
    struct st_json d;
    struct st_buf b;
    int rc = 0;
    uint64_t line = 0;
    memset(c, 0, sizeof(*c));
    st_json_init(&d, 0);
    st_buf_init(&b);
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(jsonl + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - jsonl) : len;
        line++;
        const char *p = jsonl + pos;
        size_t n = end - pos;
        pos = end + 1;
        if (is_blank(p, n)) {
            continue;
        }
        rc = st_json_parse(&d, p, n);
        if (rc == ST_EUTF8) {
            rc = line_error(err, errlen, id, line, "invalid UTF-8 inside a string");
            goto out;
        }
        int t = rc == 0 ? st_json_get(&d, 0, "text") : -1;
        if (t < 0 || st_json_type(&d, t) != ST_JSON_STRING) {
            rc = line_error(err, errlen, id, line, "expected a JSON object with a string \"text\"");
            goto out;
        }
        if (b.len) {
            st_buf_puts(&b, "\n\n");
        }
        rc = st_json_str(&d, t, &b);
        if (rc) {
            goto out;
        }
    }
    c->len = b.len;
    c->text = st_buf_take(&b);
    c->hash = st_hash64(c->text, c->len);
    set_id(c, id);
out:
    st_json_release(&d);
    st_buf_release(&b);
    return rc;
}

void st_corpus_release(struct st_corpus *c)
{
    st_freep(&c->text);
    c->len = 0;
    c->hash = 0;
    c->id[0] = '\0';
}
