/*
 * Sends the steps of a qualification check to an OpenAI-compatible server: non-streaming chat
 * completions over a libcurl multi handle, blocking until every request of a batch has ended or
 * hit its timeout. Not a load generator: requests are few, and their timing is reported only as
 * end-to-end seconds. Sim targets get X-Servetune-Expect with each step's expected answer.
 *
 * Also runs Debian's ffmpeg (st_proc_run, never a shell, under a deadline) to turn a rendered
 * clip into an MP4.
 */
#ifndef ST_QUAL_RUNNER_H
#define ST_QUAL_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "qual/check.h"

struct st_qual_client {
    const char *base_url;         /* borrowed: scheme://host[:port][/prefix], no trailing / */
    const char *api_key;          /* borrowed secret; NULL or "": none */
    const char *model;            /* borrowed; model name sent */
    const char *reasoning_effort; /* borrowed; NULL: not sent */
    int sim;                      /* the target is servetune sim: send X-Servetune-Expect */
    uint64_t seed;                /* the "seed" field of every request */
    uint64_t timeout_ms;          /* per request, 0: 600000 */
    int no_response_format;       /* send the JSON check's instruction only */
};

struct st_qual_reply {
    long status;            /* HTTP status, 0 when none came */
    struct st_buf content;  /* owned: choices[0].message.content ("" when none) */
    uint64_t prompt_tokens; /* usage; 0 when the server gave none */
    uint64_t completion_tokens;
    char finish_reason[16]; /* choices[0].finish_reason ("stop", "length"...), "" if none */
    double elapsed_s;       /* from the send to the last byte, wall clock */
    int streamed;           /* the step was streamed (fixed-length outputs): the times below */
    double first_s;         /* from the send to the first content chunk */
    double last_s;          /* from the send to the last content chunk */
    int has_vt;             /* the simulator stamped the chunks with its virtual time: */
    double first_vt_s;      /* the first content chunk's, virtual seconds */
    double last_vt_s;       /* the last one's */
    char error[256];        /* transport error or the server's message, one line (folded, cut
                             * at 255 bytes); "" on a 2xx answer */
};

void st_qual_reply_init(struct st_qual_reply *r);
void st_qual_reply_release(struct st_qual_reply *r);

/*
 * Builds the JSON body of step s for c into out (appended). Pure. Fixed-length steps
 * (ignore_eos) are streamed with usage in the last chunk, so their decode time can be read.
 */
void st_qual_body(const struct st_qual_client *c, const struct st_check_step *s, int with_format,
                  struct st_buf *out);

/*
 * Sends steps[0..n) at once (all concurrently) and fills replies[0..n) (initialized by the
 * caller). ids[i] becomes the X-Request-Id (may be NULL). Returns 0 when every request was tried
 * (failures are data in the replies), or -ENOMEM when curl cannot start.
 */
int st_qual_send(const struct st_qual_client *c, const struct st_check_step *const *steps,
                 const char *const *ids, size_t n, struct st_qual_reply *replies) ST_WUR;

/*
 * Renders the 120 s clip of seed (st_render_video_frames) into a temporary directory, runs
 * ffmpeg (path ffmpeg) on it, and appends the MP4 to out. ffmpeg gets 60 s: past that its
 * process group gets SIGTERM, SIGKILL 5 s later, and the call returns ST_ETIMEOUT. Returns 0,
 * ST_ENOTFOUND when ffmpeg is not there, or an error with err filled. The directory is removed
 * either way.
 */
int st_qual_video_mp4(const char *ffmpeg, uint64_t seed, const char *font, struct st_buf *out,
                      char *err, size_t errlen) ST_WUR;

#endif
