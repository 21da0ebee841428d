/*
 * Deterministic word salad. See synth.h. The first word is chosen from the request index so that
 * two requests of one run never share a prefix longer than a few bytes (no accidental prefix-cache
 * hits); the rest come from a seeded generator.
 */
#include "workload/synth.h"

#include <string.h>

#include "base/rng.h"

static const char *const words[] = {
    "the",      "of",       "and",     "to",       "in",       "a",        "is",      "that",
    "for",      "it",       "as",      "was",      "with",     "be",       "by",      "on",
    "not",      "he",       "this",    "are",      "or",       "his",      "from",    "at",
    "which",    "but",      "have",    "an",       "had",      "they",     "you",     "were",
    "their",    "one",      "all",     "we",       "can",      "her",      "has",     "there",
    "been",     "if",       "more",    "when",     "will",     "would",    "who",     "so",
    "no",       "river",    "market",  "window",   "garden",   "engine",   "letter",  "winter",
    "station",  "history",  "village", "machine",  "doctor",   "evening",  "morning", "silver",
    "captain",  "harbour",  "island",  "kitchen",  "library",  "mountain", "number",  "orange",
    "pattern",  "question", "reason",  "signal",   "theory",   "valley",   "weather", "yellow",
    "quietly",  "slowly",   "careful", "bright",   "ancient",  "distant",  "gentle",  "hidden",
    "measured", "ordinary", "patient", "rapid",    "simple",   "steady",   "strange", "useful",
    "wrote",    "carried",  "found",   "opened",   "turned",   "watched",  "waited",  "walked",
    "counted",  "followed", "noticed", "returned", "answered", "believed", "crossed", "gathered",
};

#define NWORDS (sizeof(words) / sizeof(words[0]))

void st_synth_text(uint64_t seed, uint64_t idx, size_t nbytes, struct st_buf *out)
{
    struct st_rng r;
    st_rng_seed(&r, seed ^ (idx * 0x9e3779b97f4a7c15ull));
    st_buf_reserve(out, nbytes);
    size_t start = out->len;
    /* A decimal request number up front makes prompts distinct from their first bytes. */
    st_buf_printf(out, "%llu. ", (unsigned long long)idx);
    int sentence_start = 1;
    while (out->len - start < nbytes) {
        const char *w = words[st_rng_below(&r, NWORDS)];
        size_t wl = strlen(w);
        if (sentence_start) {
            char first = (char)(w[0] - 'a' + 'A');
            st_buf_putc(out, first);
            st_buf_append(out, w + 1, wl - 1);
            sentence_start = 0;
        } else {
            st_buf_append(out, w, wl);
        }
        if (st_rng_below(&r, 12) == 0) {
            st_buf_puts(out, ". ");
            sentence_start = 1;
        } else {
            st_buf_putc(out, ' ');
        }
    }
    /* Trim to the exact size; the cut may fall inside a word, which is harmless. */
    out->len = start + nbytes;
    out->data[out->len] = '\0';
}
