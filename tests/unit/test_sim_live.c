/*
 * Tests for the pure parts of the simulator's model mode: image headers (PNG IHDR, JPEG SOF),
 * base64 and data URLs, chat prompt rendering and media tokens, token ids, the expected-answer
 * text and its perturbation, fault keys and scenario files, the dialects' error bodies, log
 * lines and response endings, and the /metrics exposition per dialect (every sample line parsed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sim/answer.h"
#include "sim/dialect.h"
#include "sim/info.h"
#include "sim/metrics.h"
#include "sim/model/tok.h"
#include "sim/prompt.h"
#include "sim/scenario.h"
#include "sim/spec.h"

/* ---- helpers ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64(const unsigned char *in, size_t n, struct st_buf *out)
{
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)in[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= in[i + 2];
        }
        st_buf_putc(out, b64chars[(v >> 18) & 63]);
        st_buf_putc(out, b64chars[(v >> 12) & 63]);
        st_buf_putc(out, i + 1 < n ? b64chars[(v >> 6) & 63] : '=');
        st_buf_putc(out, i + 2 < n ? b64chars[v & 63] : '=');
    }
}

/* A PNG header (signature + IHDR) of w x h, with 16 bytes of fake data after it. */
static size_t png(unsigned char *b, uint32_t w, uint32_t h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memcpy(b, sig, 8);
    unsigned char ihdr[8] = {0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    memcpy(b + 8, ihdr, 8);
    for (int i = 0; i < 4; i++) {
        b[16 + i] = (unsigned char)(w >> (24 - 8 * i));
        b[20 + i] = (unsigned char)(h >> (24 - 8 * i));
    }
    memset(b + 24, 0x42, 16);
    return 40;
}

/* A small profile for rendering tests. */
static void profile(struct st_profile *p, struct st_mem_plan *m, enum st_dialect d)
{
    memset(p, 0, sizeof(*p));
    memset(m, 0, sizeof(*m));
    snprintf(p->model.name, sizeof(p->model.name), "tiny");
    p->model.attention = ST_ATTN_GQA;
    p->model.vocab = 32000;
    p->model.hidden = 1024;
    p->hw.gpu_mem_bytes = 80e9;
    p->engine.dialect = d;
    p->engine.tp = 1;
    p->engine.pp = 1;
    p->engine.dp_attention = 1;
    p->engine.mem_fraction = 0.9;
    p->engine.kv_dtype_bytes = 2;
    p->engine.page_size = 16;
    p->engine.max_batched_tokens = 8192;
    p->engine.max_running = 4;
    p->engine.context_length = 131072;
    p->engine.prefix_caching = 1;
    p->engine.spec_method = ST_SPEC_MTP;
    p->engine.spec_steps = 2;
    m->kv_pool_tokens = 686320;
    m->kv_pool_blocks = 686320 / 16;
    m->kv_bytes_per_token = 1024;
    m->kv_budget_bytes = 686320.0 * 1024;
    m->weights_bytes_per_gpu = 16e9;
    m->layers_per_gpu = 32;
    m->fits = 1;
}

/* Parses every non-comment line of an exposition: NAME[{labels}] VALUE, VALUE a number. */
static void check_exposition(const char *text)
{
    const char *p = text;
    int samples = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        if (*p != '#') {
            const char *sp = nl;
            while (sp > p && sp[-1] != ' ') {
                sp--;
            }
            assert_true(sp > p + 1);
            char *end;
            double v = strtod(sp, &end);
            (void)v;
            assert_ptr_equal(end, nl);
            samples++;
        } else {
            assert_true(strncmp(p, "# HELP ", 7) == 0 || strncmp(p, "# TYPE ", 7) == 0);
        }
        p = nl + 1;
    }
    assert_true(samples > 5);
}

/* ---- images and base64 ---- */

static void test_png(void **state)
{
    (void)state;
    unsigned char b[64];
    uint32_t w = 0, h = 0;
    size_t n = png(b, 2048, 1536);
    assert_int_equal(st_sim_png_size(b, n, &w, &h), 0);
    assert_int_equal(w, 2048);
    assert_int_equal(h, 1536);
    assert_int_equal(st_sim_png_size(b, 23, &w, &h), ST_EPARSE); /* cut short */
    b[12] = 'X';
    assert_int_equal(st_sim_png_size(b, n, &w, &h), ST_EPARSE); /* not IHDR */
    png(b, 0, 10);
    assert_int_equal(st_sim_png_size(b, n, &w, &h), ST_EPARSE); /* zero width */
    png(b, 0x80000000u, 10);
    assert_int_equal(st_sim_png_size(b, n, &w, &h), ST_EPARSE); /* over 2^31 - 1 */
}

static void test_jpeg(void **state)
{
    (void)state;
    /* SOI, an APP0 segment of 16 bytes, then SOF0 with height 480 and width 640. */
    unsigned char b[64] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10};
    size_t n = 4 + 16;
    unsigned char sof[] = {0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03};
    memcpy(b + n, sof, sizeof(sof));
    n += sizeof(sof) + 8;
    uint32_t w = 0, h = 0;
    assert_int_equal(st_sim_jpeg_size(b, n, &w, &h), 0);
    assert_int_equal(w, 640);
    assert_int_equal(h, 480);
    b[1] = 0xD9;
    assert_int_equal(st_sim_jpeg_size(b, n, &w, &h), ST_EPARSE);
}

static void test_base64(void **state)
{
    (void)state;
    struct st_buf out;
    st_buf_init(&out);
    assert_int_equal(st_sim_base64_decode("aGVsbG8=", 8, 100, &out), 0);
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "hello", 5);
    st_buf_clear(&out);
    assert_int_equal(st_sim_base64_decode("aGVsbG8", 7, 100, &out), 0); /* padding optional */
    assert_memory_equal(out.data, "hello", 5);
    st_buf_clear(&out);
    assert_int_equal(st_sim_base64_decode("aGVsbG8=", 8, 2, &out), 0); /* max_out */
    assert_int_equal(out.len, 2);
    st_buf_clear(&out);
    assert_int_equal(st_sim_base64_decode("aGV*bG8=", 8, 100, &out), ST_EPARSE);
    assert_int_equal(st_sim_base64_decode("a", 1, 100, &out), ST_EPARSE);
    st_buf_release(&out);
}

static void test_data_url(void **state)
{
    (void)state;
    unsigned char img[64];
    size_t n = png(img, 300, 200);
    struct st_buf url, scratch;
    st_buf_init(&url);
    st_buf_init(&scratch);
    st_buf_puts(&url, "data:image/png;base64,");
    b64(img, n, &url);
    uint32_t w = 0, h = 0;
    assert_int_equal(st_sim_data_url_image_size(url.data, url.len, &scratch, &w, &h), 0);
    assert_int_equal(w, 300);
    assert_int_equal(h, 200);
    assert_int_equal(st_sim_data_url_image_size("https://x/y.png", 15, &scratch, &w, &h),
                     ST_EPARSE);
    assert_int_equal(st_sim_data_url_image_size("data:image/png,abc", 18, &scratch, &w, &h),
                     ST_EPARSE);
    st_buf_release(&url);
    st_buf_release(&scratch);
}

/* ---- prompts ---- */

static void test_prompt_chat(void **state)
{
    (void)state;
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},"
                       "{\"type\":\"text\",\"text\":\"there\"}]}]}";
    struct st_json d;
    struct st_buf want, scratch;
    struct st_sim_prompt p;
    char err[256];
    st_json_init(&d, 0);
    st_buf_init(&want);
    st_buf_init(&scratch);
    st_sim_prompt_init(&p);
    assert_int_equal(st_json_parse(&d, body, strlen(body)), 0);
    struct st_sim_prompt_opts o = {.patch = 0, .max_text_tokens = 1000, .generation_prompt = 1};
    assert_int_equal(
        st_sim_prompt_chat(&p, &d, st_json_get(&d, 0, "messages"), &o, &scratch, err, sizeof(err)),
        0);
    st_tok_render_message(&want, "system", 6, "be brief", 8);
    st_tok_render_message(&want, "user", 4, "hi there", 8);
    st_tok_render_generation_prompt(&want);
    assert_int_equal(p.text.len, want.len);
    assert_memory_equal(p.text.data, want.data, want.len);
    assert_int_equal(p.tokens, st_tok_count(want.data, want.len));
    assert_int_equal(p.media_tokens, 0);

    /* An image: tokens by the patch rule, wherever it sits; text-only models refuse it. */
    unsigned char img[64];
    size_t n = png(img, 2048, 1536);
    struct st_buf b2;
    st_buf_init(&b2);
    st_buf_puts(&b2, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                     "\"abc\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;"
                     "base64,");
    b64(img, n, &b2);
    st_buf_puts(&b2, "\"}}]}]}");
    assert_int_equal(st_json_parse(&d, b2.data, b2.len), 0);
    assert_int_equal(
        st_sim_prompt_chat(&p, &d, st_json_get(&d, 0, "messages"), &o, &scratch, err, sizeof(err)),
        ST_EPARSE);
    assert_non_null(strstr(err, "images"));
    assert_string_equal(p.refused, "image_url");
    o.patch = 28;
    o.max_text_tokens = 100000;
    assert_int_equal(
        st_sim_prompt_chat(&p, &d, st_json_get(&d, 0, "messages"), &o, &scratch, err, sizeof(err)),
        0);
    uint64_t img_tokens = st_tok_image(2048, 1536, 28);
    assert_int_equal(p.media_tokens, img_tokens);
    assert_int_equal(p.images, 1);
    st_buf_clear(&want);
    st_tok_render_message(&want, "user", 4, "abc", 3);
    st_tok_render_generation_prompt(&want);
    assert_int_equal(p.tokens, st_tok_count(want.data, want.len) + img_tokens);
    /* Past max_text_tokens the image is counted, not written. */
    o.max_text_tokens = 10;
    assert_int_equal(
        st_sim_prompt_chat(&p, &d, st_json_get(&d, 0, "messages"), &o, &scratch, err, sizeof(err)),
        0);
    assert_int_equal(p.unexpanded, img_tokens);
    assert_int_equal(p.tokens, st_tok_count(want.data, want.len) + img_tokens);

    const char *bad = "{\"messages\":[1]}";
    assert_int_equal(st_json_parse(&d, bad, strlen(bad)), 0);
    assert_int_equal(
        st_sim_prompt_chat(&p, &d, st_json_get(&d, 0, "messages"), &o, &scratch, err, sizeof(err)),
        ST_EPARSE);
    st_buf_release(&b2);
    st_sim_prompt_release(&p);
    st_buf_release(&want);
    st_buf_release(&scratch);
    st_json_release(&d);
}

static void test_prompt_completion(void **state)
{
    (void)state;
    struct st_json d;
    struct st_buf scratch;
    struct st_sim_prompt p;
    char err[256];
    st_json_init(&d, 0);
    st_buf_init(&scratch);
    st_sim_prompt_init(&p);
    const char *a = "{\"prompt\":[1,2,3,70000]}";
    assert_int_equal(st_json_parse(&d, a, strlen(a)), 0);
    assert_int_equal(
        st_sim_prompt_completion(&p, &d, st_json_get(&d, 0, "prompt"), &scratch, err, sizeof(err)),
        0);
    assert_int_equal(p.tokens, 4);
    assert_memory_equal(p.text.data, "aaab", 4);
    const char *b = "{\"prompt\":\"hello world\"}";
    assert_int_equal(st_json_parse(&d, b, strlen(b)), 0);
    assert_int_equal(
        st_sim_prompt_completion(&p, &d, st_json_get(&d, 0, "prompt"), &scratch, err, sizeof(err)),
        0);
    assert_int_equal(p.tokens, 3);
    const char *c = "{\"prompt\":{}}";
    assert_int_equal(st_json_parse(&d, c, strlen(c)), 0);
    assert_int_equal(
        st_sim_prompt_completion(&p, &d, st_json_get(&d, 0, "prompt"), &scratch, err, sizeof(err)),
        ST_EPARSE);
    /* Token ids: one per 4 code points, stable, in range. */
    struct st_buf ids;
    st_buf_init(&ids);
    assert_int_equal(st_sim_prompt_ids("hello world", 11, 100, 10, &ids), 3);
    assert_non_null(strchr(ids.data, ','));
    st_buf_clear(&ids);
    assert_int_equal(st_sim_prompt_ids("hello world", 11, 100, 1, &ids), 3);
    assert_null(strchr(ids.data, ','));
    st_buf_release(&ids);
    st_sim_prompt_release(&p);
    st_buf_release(&scratch);
    st_json_release(&d);
}

/* ---- answers ---- */

static void test_answer_text(void **state)
{
    (void)state;
    struct st_sim_answer a;
    struct st_buf out;
    st_sim_answer_init(&a);
    st_buf_init(&out);
    /* No answer: the fixed-mode filler. */
    st_sim_answer_render(&a, 0, 3, &out);
    assert_string_equal(out.data, " aaa aab aac");
    assert_int_equal(st_sim_answer_set(&a, "42 is \"it\"", 10), 0);
    assert_int_equal(a.tokens, 3); /* 10 code points, padded to 12 */
    st_buf_clear(&out);
    st_sim_answer_render(&a, 0, 5, &out);
    assert_string_equal(out.data, "42 is \\\"it\\\"   aad aae");
    /* Split across chunks, the pieces join to the same text. */
    struct st_buf joined;
    st_buf_init(&joined);
    for (uint64_t t = 0; t < 5; t++) {
        st_sim_answer_render(&a, t, 1, &joined);
    }
    assert_string_equal(joined.data, out.data);
    /* Multi-byte code points stay whole inside a token. */
    assert_int_equal(st_sim_answer_set(&a, "\xc3\xa9t\xc3\xa9 ok", 9), 0);
    assert_int_equal(a.tokens, 2);
    st_buf_clear(&out);
    st_sim_answer_render(&a, 0, 1, &out);
    assert_string_equal(out.data, "\xc3\xa9t\xc3\xa9 ");
    char big[ST_SIM_ANSWER_MAX_BYTES + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(st_sim_answer_set(&a, big, sizeof(big)), ST_ETOOBIG);
    st_buf_release(&joined);
    st_buf_release(&out);
    st_sim_answer_release(&a);
}

static void test_answer_wrong(void **state)
{
    (void)state;
    struct st_buf out;
    st_buf_init(&out);
    st_sim_answer_perturb("Paris 1889!", 11, &out);
    assert_string_equal(out.data, "Qbsjt 2990!");
    st_buf_clear(&out);
    st_sim_answer_perturb("zZ9", 3, &out);
    assert_string_equal(out.data, "aA0");
    st_buf_clear(&out);
    st_sim_answer_perturb("...", 3, &out);
    assert_string_equal(out.data, "not ...");
    st_buf_release(&out);

    assert_false(st_sim_answer_wrong(0.0, 1, 2));
    assert_true(st_sim_answer_wrong(1.0, 1, 2));
    /* Deterministic per (seed, key), and near the rate over many keys. */
    int wrong = 0;
    for (uint64_t k = 0; k < 10000; k++) {
        int w = st_sim_answer_wrong(0.3, 7, k);
        assert_int_equal(w, st_sim_answer_wrong(0.3, 7, k));
        wrong += w;
    }
    assert_true(wrong > 2700 && wrong < 3300);
}

static void test_status_rate(void **state)
{
    (void)state;
    struct st_sim_spec s;
    char err[256];
    st_sim_spec_init(&s);
    assert_true(s.status_rate == 1.0);
    assert_false(st_sim_status_applies(&s, 1, 1)); /* no status */
    assert_int_equal(st_sim_spec_apply(&s, "status=503,status_rate=0.25", 27, err, sizeof(err)), 0);
    int hits = 0;
    for (uint64_t k = 1; k <= 4000; k++) {
        hits += st_sim_status_applies(&s, 9, k);
        assert_int_equal(st_sim_status_applies(&s, 9, k), st_sim_status_applies(&s, 9, k));
    }
    assert_true(hits > 850 && hits < 1150);
    assert_int_equal(st_sim_spec_apply(&s, "status_rate=1.5", 15, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "status_rate"));
    assert_int_equal(st_sim_spec_apply(&s, "status_rate=1", 13, err, sizeof(err)), 0);
    assert_true(st_sim_status_applies(&s, 9, 1));
}

/* ---- faults and scenarios ---- */

static void test_faults_apply(void **state)
{
    (void)state;
    struct st_sim_faults f;
    struct st_sim_spec s;
    char err[256];
    st_sim_faults_init(&f);
    st_sim_spec_init(&s);
    assert_false(st_sim_faults_any(&f));
    const char *t = "crash_after_requests=3, stall_after=2, memory_pressure_blocks=10, at_s=1.5";
    assert_int_equal(st_sim_faults_apply(&f, &s, t, strlen(t), err, sizeof(err)), 0);
    assert_int_equal(f.crash_after_requests, 3);
    assert_int_equal(f.pressure_blocks, 10);
    assert_true(f.pressure_at_s == 1.5);
    assert_int_equal(s.stall_after, 2);
    assert_true(st_sim_faults_any(&f));
    /* All or nothing over both. */
    struct st_sim_faults f0 = f;
    struct st_sim_spec s0 = s;
    t = "slow_start_s=5,bogus=1";
    assert_int_equal(st_sim_faults_apply(&f, &s, t, strlen(t), err, sizeof(err)), ST_ENOTFOUND);
    assert_memory_equal(&f, &f0, sizeof(f));
    assert_memory_equal(&s, &s0, sizeof(s));
    t = "crash_after_s=-1";
    assert_int_equal(st_sim_faults_apply(&f, &s, t, strlen(t), err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "crash_after_s"));
}

static void test_scenario(void **state)
{
    (void)state;
    struct st_sim_faults f;
    struct st_sim_spec s;
    char err[256];
    st_sim_faults_init(&f);
    st_sim_spec_init(&s);
    const char *ok = "---\n# a scenario\n\ncrash_after_s: 30  # late\nstatus: \"429\"\n"
                     "status_rate: 0.5\r\nslow_start_s: 2\n";
    assert_int_equal(st_sim_scenario_parse(&f, &s, ok, strlen(ok), "s.yaml", err, sizeof(err)), 0);
    assert_true(f.crash_after_s == 30);
    assert_true(f.slow_start_s == 2);
    assert_int_equal(s.status, 429);
    assert_true(s.status_rate == 0.5);
    static const struct {
        const char *text;
        const char *where;
    } bad[] = {
        {"status: 429\nnope: 1\n", "s.yaml:2:"},
        {"status: 429\nstatus: 500\n", "s.yaml:2: status: given twice"},
        {"faults:\n  status: 1\n", "s.yaml:1:"},
        {"status 429\n", "s.yaml:1: expected"},
        {"\n\n  status: 500\n", "s.yaml:3: indented"},
        {"stall_after: many\n", "s.yaml:1: bad value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct st_sim_faults f2;
        struct st_sim_spec s2;
        st_sim_faults_init(&f2);
        st_sim_spec_init(&s2);
        err[0] = '\0';
        assert_int_equal(st_sim_scenario_parse(&f2, &s2, bad[i].text, strlen(bad[i].text), "s.yaml",
                                               err, sizeof(err)),
                         ST_EPARSE);
        if (!strstr(err, bad[i].where)) {
            fail_msg("case %zu: %s (want %s)", i, err, bad[i].where);
        }
    }
}

/* ---- dialects ---- */

static void test_errors(void **state)
{
    (void)state;
    struct st_buf b;
    struct st_json d;
    st_buf_init(&b);
    st_json_init(&d, 0);
    st_sim_dialect_error(&b, ST_DIALECT_VLLM, 400, "bad");
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_true(
        st_json_streq(&d, st_json_get(&d, st_json_get(&d, 0, "error"), "type"), "BadRequestError"));
    st_buf_clear(&b);
    st_sim_dialect_error(&b, ST_DIALECT_SGLANG, 400, "bad");
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "object"), "error"));
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "message"), "bad"));
    st_buf_clear(&b);
    st_sim_dialect_ctx_error(&b, ST_DIALECT_LLAMACPP, "too long", 2998, 2048);
    assert_string_equal(b.data, "{\"error\":{\"code\":400,\"message\":\"too long\",\"type\":"
                                "\"exceed_context_size_error\",\"n_prompt_tokens\":2998,"
                                "\"n_ctx\":2048}}");
    st_buf_clear(&b);
    /* Media to a text-only model: llama.cpp b4748's 500 echoing the messages over many lines;
     * the others the 400 with the reason. */
    static const char msgs[] = "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
                               "\"image_url\":{\"url\":\"data:,a\\\"]\"}}]}]";
    assert_int_equal(st_sim_dialect_media_refusal(&b, ST_DIALECT_LLAMACPP, "image_url", "no", msgs,
                                                  strlen(msgs)),
                     500);
    assert_string_equal(b.data, "Failed to parse messages: Unsupported content part type: "
                                "\"image_url\"; messages = [\n  {\n    \"role\": \"user\",\n"
                                "    \"content\": [\n      {\n        \"type\": \"image_url\",\n"
                                "        \"image_url\": {\n          \"url\": \"data:,a\\\"]\"\n"
                                "        }\n      }\n    ]\n  }\n]");
    st_buf_clear(&b);
    assert_int_equal(st_sim_dialect_media_refusal(&b, ST_DIALECT_VLLM, "image_url", "no images",
                                                  msgs, strlen(msgs)),
                     400);
    assert_string_equal(b.data, "no images");
    st_buf_clear(&b);
    int code = 0;
    st_sim_dialect_health(&b, ST_DIALECT_LLAMACPP, 0, &code);
    assert_int_equal(code, 503);
    assert_string_equal(b.data, "{\"error\":{\"message\":\"Loading model\",\"type\":"
                                "\"unavailable_error\",\"code\":503}}");
    st_buf_clear(&b);
    st_sim_dialect_health(&b, ST_DIALECT_VLLM, 1, &code);
    assert_int_equal(code, 200);
    assert_int_equal(b.len, 0);
    st_json_release(&d);
    st_buf_release(&b);
}

static void test_log_lines(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_mem_plan m;
    struct st_buf b;
    st_buf_init(&b);
    profile(&p, &m, ST_DIALECT_VLLM);
    st_sim_dialect_startup(&b, &p, &m);
    assert_non_null(strstr(b.data, "GPU KV cache size: 686,320 tokens\n"));
    assert_non_null(strstr(b.data, "Maximum concurrency for 131,072 tokens per request: 5.24x"));
    assert_non_null(strstr(b.data, "Available KV cache memory: 0.65 GiB"));
    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_SGLANG;
    p.model.attention = ST_ATTN_MLA;
    st_sim_dialect_startup(&b, &p, &m);
    assert_non_null(strstr(b.data, "KV Cache is allocated. #tokens: 686320, KV size: 0.65 GB\n"));
    assert_non_null(strstr(b.data, "max_total_num_tokens=686320, chunked_prefill_size=8192"));
    st_buf_clear(&b);
    p.model.attention = ST_ATTN_GQA;
    st_sim_dialect_startup(&b, &p, &m);
    assert_non_null(strstr(b.data, "#tokens: 686320, K size: 0.33 GB, V size: 0.33 GB"));
    st_buf_clear(&b);
    st_sim_dialect_ready(&b, &p);
    assert_string_equal(b.data, "The server is fired up and ready to roll!\n");
    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_LLAMACPP;
    st_sim_dialect_startup(&b, &p, &m);
    assert_non_null(strstr(b.data, "llama_kv_cache: size = "));
    assert_non_null(strstr(b.data, "686320 cells,  32 layers, 4/4 seqs), K (f16)"));
    st_buf_clear(&b);
    snprintf(m.reason, sizeof(m.reason), "ggml: cudaMalloc failed: out of memory");
    st_sim_dialect_oom(&b, &p, &m);
    assert_non_null(strstr(b.data, "cudaMalloc failed"));
    assert_non_null(strstr(b.data, "failed to allocate buffer for kv cache"));
    st_buf_release(&b);
}

/* Every SSE event of text parses; returns how many there are and the last JSON's finish. */
static int check_events(const char *text, struct st_json *d)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        assert_memory_equal(p, "data: ", 6);
        if (strncmp(p, "data: [DONE]", 12) != 0) {
            assert_int_equal(st_json_parse(d, p + 6, (size_t)(end - p - 6)), 0);
        }
        n++;
        p = end + 2;
    }
    return n;
}

static void test_tail(void **state)
{
    (void)state;
    struct st_buf b;
    struct st_json d;
    st_buf_init(&b);
    st_json_init(&d, 0);
    struct st_sim_resp r = {.api = ST_SIM_API_CHAT,
                            .id = 7,
                            .created_unix_s = 1,
                            .model = "m",
                            .n_tokens = 5,
                            .prompt_tokens = 18,
                            .cached_tokens = 2};
    struct st_sim_timings t = {
        .cache_n = 2, .prompt_n = 16, .prompt_ms = 4, .predicted_n = 5, .predicted_ms = 5};
    struct st_sim_ending e = {.usage_on = 1, .done = 1, .timings = &t};
    /* vLLM: usage chunk and [DONE]; the finish reason rode on the last content chunk. */
    st_sim_dialect_tail(&b, ST_DIALECT_VLLM, &r, &e);
    assert_int_equal(check_events(b.data, &d), 2);
    assert_null(strstr(b.data, "timings"));
    assert_non_null(strstr(b.data, "\"cached_tokens\":2"));
    /* SGLang: a separate finish chunk with matched_stop, usage, [DONE]. */
    st_buf_clear(&b);
    st_sim_dialect_tail(&b, ST_DIALECT_SGLANG, &r, &e);
    assert_int_equal(check_events(b.data, &d), 3);
    assert_non_null(strstr(b.data, "\"delta\":{},\"finish_reason\":\"length\",\"matched_stop\""));
    /* llama.cpp without usage: timings on the finish chunk. */
    st_buf_clear(&b);
    e.usage_on = 0;
    st_sim_dialect_tail(&b, ST_DIALECT_LLAMACPP, &r, &e);
    assert_int_equal(check_events(b.data, &d), 2);
    assert_non_null(strstr(b.data, "\"delta\":{}}],\"timings\":{\"cache_n\":2,\"prompt_n\":16"));
    /* llama.cpp /v1/completions: usage always on the finish chunk. */
    st_buf_clear(&b);
    r.api = ST_SIM_API_COMPLETIONS;
    st_sim_dialect_tail(&b, ST_DIALECT_LLAMACPP, &r, &e);
    assert_int_equal(check_events(b.data, &d), 2);
    assert_non_null(strstr(b.data, "\"usage\":{\"completion_tokens\":5"));
    /* A whole body with the answer's text. */
    struct st_sim_answer a;
    st_sim_answer_init(&a);
    assert_int_equal(st_sim_answer_set(&a, "yes", 3), 0);
    st_buf_clear(&b);
    r.api = ST_SIM_API_CHAT;
    e.usage_on = 1;
    st_sim_dialect_body(&b, ST_DIALECT_SGLANG, &r, &a, &e);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_non_null(strstr(b.data, "\"content\":\"yes  aab aac aad aae\""));
    st_sim_answer_release(&a);
    st_json_release(&d);
    st_buf_release(&b);
}

/* ---- metrics ---- */

static void test_hist(void **state)
{
    (void)state;
    struct st_sim_hist h;
    st_sim_hist_init_ttft(&h, ST_DIALECT_VLLM);
    assert_true(h.le[0] == 0.001);
    st_sim_hist_observe(&h, 0.001); /* le is inclusive */
    st_sim_hist_observe(&h, 0.0011);
    st_sim_hist_observe(&h, 1e9);
    assert_int_equal(h.counts[0], 1);
    assert_int_equal(h.counts[1], 1);
    assert_int_equal(h.counts[h.n], 1);
    assert_int_equal(h.count, 3);
    st_sim_hist_init_ttft(&h, ST_DIALECT_SGLANG);
    assert_true(h.le[0] == 0.1);
}

static void test_metrics(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_mem_plan m;
    struct st_sim_metrics x;
    struct st_buf b;
    st_buf_init(&b);
    memset(&x, 0, sizeof(x));
    x.bs.ranks = 1;
    x.bs.running = 2;
    x.bs.waiting = 3;
    x.bs.kv_total_tokens = 1000;
    x.bs.kv_used_tokens = 250;
    x.bs.prefix_query_tokens = 400;
    x.bs.prefix_hit_tokens = 100;
    x.bs.generation_tokens = 77;
    x.bs.spec_drafts = 10;
    x.bs.spec_draft_tokens = 20;
    x.bs.spec_accepted_tokens = 15;
    x.bs.spec_accepted_per_pos[0] = 9;
    x.bs.spec_accepted_per_pos[1] = 6;
    x.bs.preemptions = 1;
    st_sim_hist_init_ttft(&x.ttft, ST_DIALECT_VLLM);
    st_sim_hist_observe(&x.ttft, 0.25);
    st_sim_hist_observe(&x.ttft, 0.0625); /* exact in binary, so the sum prints exactly */

    profile(&p, &m, ST_DIALECT_VLLM);
    st_sim_metrics_render(&b, &p, &m, "m\"x", &x);
    check_exposition(b.data);
    assert_non_null(strstr(b.data, "# TYPE vllm:num_requests_waiting gauge\n"));
    assert_non_null(
        strstr(b.data, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\\\"x\"} 3.0\n"));
    assert_non_null(strstr(b.data, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\\\"x\"} "
                                   "0.25\n"));
    assert_non_null(strstr(b.data, "# TYPE vllm:prefix_cache_hits_total counter\n"));
    assert_non_null(strstr(b.data, "vllm:spec_decode_num_accepted_tokens_per_pos_total{position="
                                   "\"1\",engine=\"0\",model_name=\"m\\\"x\"} 6.0\n"));
    assert_non_null(strstr(b.data, "vllm:time_to_first_token_seconds_bucket{le=\"0.08\","
                                   "engine=\"0\",model_name=\"m\\\"x\"} 1.0\n"));
    assert_non_null(strstr(b.data, "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\","
                                   "engine=\"0\",model_name=\"m\\\"x\"} 2.0\n"));
    assert_non_null(strstr(b.data, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name="
                                   "\"m\\\"x\"} 0.3125\n"));
    assert_non_null(strstr(b.data, "num_gpu_blocks=\"42895\""));

    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_SGLANG;
    st_sim_hist_init_ttft(&x.ttft, ST_DIALECT_SGLANG);
    st_sim_metrics_render(&b, &p, &m, "m", &x);
    check_exposition(b.data);
    assert_non_null(strstr(b.data, "sglang:num_queue_reqs{model_name=\"m\"} 3.0\n"));
    assert_non_null(strstr(b.data, "sglang:cache_hit_rate{model_name=\"m\"} 0.25\n"));
    assert_non_null(strstr(b.data, "sglang:spec_accept_length{model_name=\"m\"} 2.5\n"));
    assert_non_null(strstr(b.data, "sglang:cached_tokens_total{model_name=\"m\"} 100.0\n"));
    assert_non_null(strstr(b.data, "# TYPE sglang:num_retracted_reqs gauge\n"));

    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_LLAMACPP;
    st_sim_metrics_render(&b, &p, &m, "m", &x);
    check_exposition(b.data);
    assert_non_null(strstr(b.data, "llamacpp:requests_deferred 3\n"));
    assert_non_null(strstr(b.data, "llamacpp:prompt_tokens_total 300\n"));
    assert_non_null(strstr(b.data, "llamacpp:prompt_tokens_cached_total 100\n"));
    assert_null(strchr(b.data, '{')); /* no labels */
    assert_true(fabs(st_sim_metrics_accept_length(&x) - 2.5) < 1e-12);
    x.spec_drafts_at_flush = 10;
    x.spec_accepted_at_flush = 15;
    assert_true(st_sim_metrics_accept_length(&x) == 1.0);
    st_buf_release(&b);
}

static void test_info(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_mem_plan m;
    struct st_sim_metrics x;
    struct st_buf b;
    struct st_json d;
    st_buf_init(&b);
    st_json_init(&d, 0);
    memset(&x, 0, sizeof(x));
    profile(&p, &m, ST_DIALECT_SGLANG);
    struct st_sim_info in = {.p = &p, .plan = &m, .model = "m", .m = &x, .created_unix_s = 5};
    st_sim_info_server(&b, &in);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    int64_t v = 0;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "max_total_num_tokens"), &v), 0);
    assert_int_equal(v, 686320);
    int st0 = st_json_at(&d, st_json_get(&d, 0, "internal_states"), 0);
    assert_int_equal(
        st_json_i64(&d, st_json_get(&d, st_json_get(&d, st0, "memory_usage"), "token_capacity"),
                    &v),
        0);
    assert_int_equal(v, 686320);
    assert_true(st_json_type(&d, st_json_get(&d, st0, "avg_spec_accept_length")) == ST_JSON_NUMBER);
    st_buf_clear(&b);
    st_sim_info_models(&b, &in);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_non_null(strstr(b.data, "\"owned_by\":\"sglang\""));
    assert_non_null(strstr(b.data, "\"max_model_len\":131072"));
    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_LLAMACPP;
    st_sim_info_props(&b, &in);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_non_null(strstr(b.data, "\"n_ctx\":131072},\"total_slots\":4"));
    st_buf_clear(&b);
    st_sim_info_tokenize(&b, &in, "hello world", 11, 3, 100);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_int_equal(strncmp(b.data, "{\"tokens\":[", 11), 0);
    st_buf_clear(&b);
    p.engine.dialect = ST_DIALECT_VLLM;
    st_sim_info_tokenize(&b, &in, "hello world", 11, 3, 100);
    assert_int_equal(strncmp(b.data, "{\"count\":3,\"max_model_len\":131072,\"tokens\":[", 44), 0);
    st_json_release(&d);
    st_buf_release(&b);
}

static void test_content_text(void **state)
{
    (void)state;
    struct st_sim_tmpl t;
    struct st_json d;
    struct st_sim_resp r = {
        .api = ST_SIM_API_CHAT, .id = 1, .model = "m", .n_tokens = 4, .prompt_tokens = 10};
    st_json_init(&d, 0);
    st_sim_tmpl_init(&t, &r);
    const char *text = "a \\\"b\\\"";
    unsigned flags = ST_SIM_EV_LAST | ST_SIM_EV_USAGE;
    size_t max = st_sim_tmpl_content_text_max(&t, strlen(text), flags);
    char *out = malloc(max);
    size_t n = st_sim_tmpl_content_text(&t, out, text, strlen(text), flags, 3);
    assert_true(n <= max);
    assert_int_equal(st_json_parse(&d, out + 6, n - 8), 0);
    assert_non_null(memmem(out, n, "\"content\":\"a \\\"b\\\"\"", 19));
    assert_non_null(memmem(out, n, "\"completion_tokens\":3,\"total_tokens\":13", 39));
    assert_non_null(memmem(out, n, "\"finish_reason\":\"length\"", 24));
    free(out);
    st_sim_tmpl_release(&t);
    st_json_release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png),         cmocka_unit_test(test_jpeg),
        cmocka_unit_test(test_base64),      cmocka_unit_test(test_data_url),
        cmocka_unit_test(test_prompt_chat), cmocka_unit_test(test_prompt_completion),
        cmocka_unit_test(test_answer_text), cmocka_unit_test(test_answer_wrong),
        cmocka_unit_test(test_status_rate), cmocka_unit_test(test_faults_apply),
        cmocka_unit_test(test_scenario),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_log_lines),   cmocka_unit_test(test_tail),
        cmocka_unit_test(test_hist),        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_info),        cmocka_unit_test(test_content_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
