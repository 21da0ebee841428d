/*
 * Synthetic prompt text: deterministic English-like words from (seed, index), so every request of
 * a run gets its own text and the same seed gives the same bytes on every run and arm. Length is
 * in bytes; at about 4 bytes a token (the simulator's tokenizer rule and roughly that of real
 * English tokenizers) 4 * N bytes make about N tokens. Token-exact prompts come from the workload
 * module's calibration, not from here. Pure.
 */
#ifndef ST_WORKLOAD_SYNTH_H
#define ST_WORKLOAD_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Appends exactly nbytes bytes of text for request idx of a run seeded with seed. */
void st_synth_text(uint64_t seed, uint64_t idx, size_t nbytes, struct st_buf *out);

#endif
