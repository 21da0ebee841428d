/*
 * OpenAI-compatible request bodies. See oaireq.h.
 *
 * Our fields are written in a fixed order with the JSON writer; extra_body is parsed once to find
 * its keys (ours that it also names are left out) and its members are then copied verbatim, so
 * the body never holds a key twice unless extra_body itself does.
 */
#include "proto/oaireq.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"

void st_oaireq_defaults(struct st_oaireq *r)
{
    memset(r, 0, sizeof(*r));
    r->api = ST_API_CHAT;
    r->stream = 1;
    r->include_usage = 1;
    r->max_tokens = -1;
    r->min_tokens = -1;
    r->id_slot = -1;
}

const char *st_oaireq_path(enum st_api api)
{
    return api == ST_API_COMPLETIONS ? "/v1/completions" : "/v1/chat/completions";
}

/* True when our key must be written: extra_body (parsed in x, or NULL) does not name it. */
static int ours(const struct st_json *x, const char *key)
{
    return x == NULL || st_json_get(x, 0, key) < 0;
}

static int check_extra(const struct st_oaireq *r, struct st_json *x, char *err, size_t errlen)
{
    int rc = st_json_parse(x, r->extra_body, r->extra_body_len);
    if (rc) {
        if (err && errlen) {
            snprintf(err, errlen, "extra_body is not valid JSON (%s)", st_strerror(rc));
        }
        return ST_EPARSE;
    }
    static const char *const names[] = {
        [ST_JSON_ARRAY] = "an array",   [ST_JSON_STRING] = "a string",
        [ST_JSON_NUMBER] = "a number",  [ST_JSON_TRUE] = "a boolean",
        [ST_JSON_FALSE] = "a boolean",  [ST_JSON_NULL] = "null",
        [ST_JSON_OBJECT] = "an object", [ST_JSON_INVALID] = "nothing",
    };
    enum st_json_type t = st_json_type(x, 0);
    if (t != ST_JSON_OBJECT) {
        if (err && errlen) {
            snprintf(err, errlen, "extra_body must be a JSON object, not %s", names[t]);
        }
        return ST_EPARSE;
    }
    return 0;
}

/* Appends extra_body's members, each as written: "key":value. */
static void append_extra(struct st_jw *w, const struct st_json *x)
{
    for (int k = st_json_first(x, 0); k >= 0; k = st_json_next(x, 0, k)) {
        size_t klen, vlen;
        const char *key = st_json_raw(x, k, &klen);
        const char *val = st_json_raw(x, k + 1, &vlen);
        if (st_json_type(x, k + 1) == ST_JSON_STRING) {
            val--; /* the raw bytes of a string exclude its quotes */
            vlen += 2;
        }
        st_jw_raw(w, key - 1, klen + 2);
        st_buf_putc(w->b, ':');
        st_buf_append(w->b, val, vlen);
    }
}

/* "messages":[{"role":"user","content":text}] */
static void user_message(struct st_jw *w, const char *text, size_t len)
{
    st_jw_key(w, "messages");
    st_jw_arr_open(w);
    st_jw_obj_open(w);
    st_jw_kstr(w, "role", "user");
    st_jw_key(w, "content");
    st_jw_strn(w, text, len);
    st_jw_obj_close(w);
    st_jw_arr_close(w);
}

/* Writes the body; x is the parsed extra_body, or NULL. */
static void write_body(const struct st_oaireq *r, const struct st_json *x, struct st_buf *out)
{
    struct st_jw w;
    const char *prompt = r->prompt ? r->prompt : "";
    size_t prompt_len = r->prompt ? r->prompt_len : 0;
    int chat = r->api != ST_API_COMPLETIONS;

    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    if (r->model && ours(x, "model")) {
        st_jw_kstr(&w, "model", r->model);
    }
    if (chat && ours(x, "messages") && r->messages_json) {
        st_jw_key(&w, "messages");
        st_jw_raw(&w, r->messages_json, r->messages_len);
    } else if (chat && ours(x, "messages")) {
        user_message(&w, prompt, prompt_len);
    } else if (!chat && ours(x, "prompt")) {
        st_jw_key(&w, "prompt");
        st_jw_strn(&w, prompt, prompt_len);
    }
    if (r->stream && ours(x, "stream")) {
        st_jw_kbool(&w, "stream", 1);
    }
    if (r->stream && r->include_usage && ours(x, "stream_options")) {
        st_jw_key(&w, "stream_options");
        st_jw_obj_open(&w);
        st_jw_kbool(&w, "include_usage", 1);
        st_jw_obj_close(&w);
    }
    if (r->max_tokens >= 0 && ours(x, "max_tokens")) {
        st_jw_ki64(&w, "max_tokens", r->max_tokens);
    }
    if (r->max_tokens >= 0 && chat && ours(x, "max_completion_tokens")) {
        st_jw_ki64(&w, "max_completion_tokens", r->max_tokens);
    }
    if (r->ignore_eos && ours(x, "ignore_eos")) {
        st_jw_kbool(&w, "ignore_eos", 1);
    }
    if (r->min_tokens >= 0 && ours(x, "min_tokens")) {
        st_jw_ki64(&w, "min_tokens", r->min_tokens);
    }
    if (r->id_slot >= 0 && ours(x, "id_slot")) {
        st_jw_ki64(&w, "id_slot", r->id_slot);
    }
    if (r->has_temperature && ours(x, "temperature")) {
        st_jw_kf64(&w, "temperature", r->temperature);
    }
    if (r->has_seed && ours(x, "seed")) {
        st_jw_ki64(&w, "seed", r->seed);
    }
    if (x) {
        append_extra(&w, x);
    }
    st_jw_obj_close(&w);
}

int st_oaireq_build(const struct st_oaireq *r, struct st_buf *out, char *err, size_t errlen)
{
    if (!r->extra_body) {
        write_body(r, NULL, out);
        return 0;
    }
    /* Validated before anything is written, so a bad extra_body leaves out as it was. */
    struct st_json x;
    st_json_init(&x, 0);
    int rc = check_extra(r, &x, err, errlen);
    if (rc == 0) {
        write_body(r, &x, out);
    }
    st_json_release(&x);
    return rc;
}

void st_oaireq_check_build(const struct st_oaireq_check *c, struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "model", c->model ? c->model : "");
    st_jw_key(&w, "messages");
    st_jw_raw(&w, c->messages_json, c->messages_len);
    st_jw_ku64(&w, "max_tokens", c->max_tokens);
    st_jw_key(&w, "temperature");
    st_jw_raw(&w, "0", 1);
    st_jw_ku64(&w, "seed", c->seed);
    if (c->ignore_eos) {
        st_jw_kbool(&w, "ignore_eos", 1);
        st_jw_kbool(&w, "stream", 1);
        st_jw_key(&w, "stream_options");
        st_jw_obj_open(&w);
        st_jw_kbool(&w, "include_usage", 1);
        st_jw_obj_close(&w);
    } else {
        st_jw_kbool(&w, "stream", 0);
    }
    if (c->response_format_json) {
        st_jw_key(&w, "response_format");
        st_jw_raw(&w, c->response_format_json, c->response_format_len);
    }
    if (c->reasoning_effort) {
        st_jw_kstr(&w, "reasoning_effort", c->reasoning_effort);
    }
    st_jw_obj_close(&w);
}

void st_oaireq_tokenize(enum st_oaireq_tok s, const char *model, const char *text, size_t len,
                        struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    if (model && model[0] &&
        (s == ST_OAIREQ_TOK_PROMPT || s == ST_OAIREQ_TOK_MESSAGES || s == ST_OAIREQ_TOK_CHAT)) {
        st_jw_kstr(&w, "model", model);
    }
    switch (s) {
    case ST_OAIREQ_TOK_PROMPT:
        st_jw_key(&w, "prompt");
        st_jw_strn(&w, text, len);
        break;
    case ST_OAIREQ_TOK_CONTENT:
        st_jw_key(&w, "content");
        st_jw_strn(&w, text, len);
        st_jw_kbool(&w, "add_special", 1);
        break;
    case ST_OAIREQ_TOK_INPUTS:
        st_jw_key(&w, "inputs");
        st_jw_strn(&w, text, len);
        break;
    case ST_OAIREQ_TOK_MESSAGES:
    case ST_OAIREQ_TOK_CHAT:
    default:
        user_message(&w, text, len);
        if (s == ST_OAIREQ_TOK_MESSAGES) {
            st_jw_kbool(&w, "add_generation_prompt", 1);
        }
        break;
    }
    st_jw_obj_close(&w);
}
