/*
 * Serving a built workload: the engine's request source, warm-up items, receipt tags and the
 * per-item lookups. A workload never changes once built, so everything here only reads it and may
 * run on any thread at once. Single-window prompts are served as pointers into the workload's
 * corpus copy; anything assembled (parts, chat messages, the tag) goes into the caller's scratch,
 * and pointers into it are taken once it is complete (it may move while it grows).
 */
#include "workload/workload.h"

#include <string.h>

#include "base/json.h"
#include "workload/build.h"

/* Appends s[0..n) JSON-escaped, without quotes (s is valid UTF-8). */
static void put_escaped(struct st_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;
    st_buf_reserve(out, n + 16);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            continue;
        }
        st_buf_append(out, s + run, i - run);
        run = i + 1;
        switch (ch) {
        case '"':
            st_buf_puts(out, "\\\"");
            break;
        case '\\':
            st_buf_puts(out, "\\\\");
            break;
        case '\n':
            st_buf_puts(out, "\\n");
            break;
        case '\r':
            st_buf_puts(out, "\\r");
            break;
        case '\t':
            st_buf_puts(out, "\\t");
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            st_buf_append(out, u, sizeof(u));
            break;
        }
        }
    }
    st_buf_append(out, s + run, n - run);
}

static void put_messages(const struct st_workload *wl, const struct st_wplan_item *it,
                         struct st_buf *out)
{
    const struct st_wplan *pl = &wl->plan;
    int open = 0;
    st_buf_putc(out, '[');
    for (uint64_t i = it->part0; i < it->part0 + it->nparts; i++) {
        const struct st_part *p = &pl->parts[i];
        switch (p->type) {
        case ST_PART_USER:
        case ST_PART_ASSISTANT:
            st_buf_puts(out, open ? "\"}," : "");
            st_buf_puts(out, p->type == ST_PART_USER ? "{\"role\":\"user\",\"content\":\""
                                                     : "{\"role\":\"assistant\",\"content\":\"");
            open = 1;
            break;
        case ST_PART_WIN:
            put_escaped(out, wl->text + (p->off - wl->text_base), (size_t)p->len);
            break;
        default:
            put_escaped(out, pl->pool.data + p->off, (size_t)p->len);
            break;
        }
    }
    st_buf_puts(out, open ? "\"}]" : "]");
}

static void put_tag(const struct st_workload *wl, const struct st_wplan_item *it, uint32_t warm_g,
                    struct st_buf *out)
{
    const struct st_wplan *pl = &wl->plan;
    struct st_jw w;
    uint64_t part0 = it ? it->part0 : pl->groups[warm_g].part0;
    uint64_t n = it ? it->nparts : pl->groups[warm_g].nparts;
    uint32_t group = it ? it->group : warm_g;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", it ? st_wl_kind_name(it->kind) : "warm");
    if (it && pl->kind == ST_WL_MIXED) {
        st_jw_kbool(&w, "mixed", 1);
    }
    if (group != ST_WPLAN_NONE) {
        st_jw_ku64(&w, "group", group);
    }
    if (it && it->turn) {
        st_jw_ku64(&w, "session", it->session);
        st_jw_ku64(&w, "turn", it->turn);
    }
    if (it && it->source >= 0) {
        st_jw_ki64(&w, pl->kind == ST_WL_TRACE ? "trace_line" : "dataset_index", it->source);
    }
    if (pl->kind != ST_WL_DATASET) {
        st_jw_key(&w, "windows");
        st_jw_arr_open(&w);
        for (uint64_t i = part0; i < part0 + n; i++) {
            if (pl->parts[i].type == ST_PART_WIN) {
                st_jw_arr_open(&w);
                st_jw_u64(&w, pl->parts[i].off);
                st_jw_u64(&w, pl->parts[i].len);
                st_jw_arr_close(&w);
            }
        }
        st_jw_arr_close(&w);
        st_jw_kstr(&w, "corpus", pl->corpus_id);
        st_jw_kstr(&w, "corpus_hash", wl->corpus_hex);
    }
    if (it) {
        st_jw_ku64(&w, "input_tokens_requested", it->requested);
    }
    st_jw_ku64(&w, "input_tokens_counted", it ? it->counted : pl->groups[warm_g].counted);
    uint64_t at = 0;
    int first = 1;
    for (uint64_t i = part0; i < part0 + n; i++) {
        const struct st_part *p = &pl->parts[i];
        if (p->type == ST_PART_NEEDLE) {
            const struct st_needle *nd = &pl->needles[p->aux];
            if (first) {
                st_jw_key(&w, "needles");
                st_jw_arr_open(&w);
                first = 0;
            }
            st_jw_obj_open(&w);
            st_jw_key(&w, "text");
            st_jw_strn(&w, pl->pool.data + p->off, (size_t)p->len);
            st_jw_key(&w, "word");
            st_jw_strn(&w, pl->pool.data + nd->word_off, (size_t)nd->word_len);
            st_jw_kf64(&w, "depth", nd->depth);
            st_jw_ku64(&w, "offset", at);
            st_jw_obj_close(&w);
        }
        at += p->type == ST_PART_USER || p->type == ST_PART_ASSISTANT ? 0 : p->len;
    }
    if (!first) {
        st_jw_arr_close(&w);
    }
    st_jw_obj_close(&w);
}

/* Fills item's text and tag for parts [part0, part0 + n); offsets into scratch are resolved
 * once everything is written (the buffer may move while it grows). */
static void fill(const struct st_workload *wl, const struct st_wplan_item *it, uint32_t warm_g,
                 struct st_req_item *item, struct st_buf *scratch)
{
    const struct st_wplan *pl = &wl->plan;
    uint64_t part0 = it ? it->part0 : pl->groups[warm_g].part0;
    uint64_t n = it ? it->nparts : pl->groups[warm_g].nparts;
    size_t text_at = scratch->len, text_len;
    int messages = it && it->kind == ST_WL_MULTI_TURN;
    const char *direct = NULL;
    if (messages) {
        put_messages(wl, it, scratch);
    } else if (n == 1 && pl->parts[part0].type == ST_PART_WIN) {
        direct = wl->text + (pl->parts[part0].off - wl->text_base);
    } else {
        st_wplan_put_text(pl, wl->text, wl->text_base, part0, n, scratch);
    }
    text_len = direct ? (size_t)pl->parts[part0].len : scratch->len - text_at;
    size_t tag_at = scratch->len;
    put_tag(wl, it, warm_g, scratch);
    const char *base = st_buf_str(scratch);
    item->tag_json = base + tag_at;
    item->tag_len = scratch->len - tag_at;
    if (messages) {
        item->messages_json = base + text_at;
        item->messages_len = text_len;
        item->prompt = NULL;
        item->prompt_len = 0;
    } else {
        item->messages_json = NULL;
        item->messages_len = 0;
        item->prompt = direct ? direct : base + text_at;
        item->prompt_len = text_len;
    }
    item->headers = NULL;
    item->n_headers = 0;
}

int st_workload_source(const void *ctx, uint64_t id, struct st_req_item *item,
                       struct st_buf *scratch)
{
    const struct st_workload *wl = ctx;
    const struct st_wplan *pl = &wl->plan;
    uint64_t i = id % pl->nitems;
    const struct st_wplan_item *it = &pl->items[i];
    fill(wl, it, 0, item, scratch);
    item->max_tokens = it->max_tokens;
    item->ignore_eos = wl->ignore_eos;
    item->input_tokens = (int64_t)it->requested;
    item->t_offset_ns = it->t_offset_ns;
    if (it->t_offset_ns != UINT64_MAX && id >= pl->nitems) {
        item->t_offset_ns = it->t_offset_ns + (id / pl->nitems) * wl->trace_period_ns;
    }
    return 0;
}

uint32_t st_workload_prefix_groups(const struct st_workload *wl)
{
    return wl->plan.ngroups;
}

int st_workload_warm_item(const struct st_workload *wl, uint32_t g, struct st_req_item *item,
                          struct st_buf *scratch)
{
    if (g >= wl->plan.ngroups) {
        st_buf_printf(scratch, "no shared-prefix group %u (the workload has %u)", g,
                      wl->plan.ngroups);
        return ST_EUSAGE;
    }
    fill(wl, NULL, g, item, scratch);
    item->max_tokens = 1;
    item->ignore_eos = 0;
    item->input_tokens = (int64_t)wl->plan.groups[g].counted;
    item->t_offset_ns = UINT64_MAX;
    return 0;
}

uint64_t st_workload_items(const struct st_workload *wl)
{
    return wl->plan.nitems;
}

uint64_t st_workload_counter_calls(const struct st_workload *wl)
{
    return wl->calls;
}

int st_workload_output_mismatch(const struct st_workload *wl, uint64_t id,
                                uint64_t completion_tokens)
{
    const struct st_wplan_item *it = &wl->plan.items[id % wl->plan.nitems];
    return wl->ignore_eos && it->max_tokens >= 0 && completion_tokens != (uint64_t)it->max_tokens;
}

void st_workload_tokens(const struct st_workload *wl, uint64_t id, uint64_t *requested,
                        uint64_t *counted)
{
    const struct st_wplan_item *it = &wl->plan.items[id % wl->plan.nitems];
    *requested = it->requested;
    *counted = it->counted;
}

double st_workload_max_len_error(const struct st_workload *wl)
{
    return wl->max_err;
}

void st_workload_windows_json(const struct st_workload *wl, struct st_buf *out)
{
    st_wplan_windows_json(&wl->plan, out);
}
