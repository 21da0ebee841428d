/*
 * Tests for src/report/report.c: the Markdown and HTML reports of the seed fixtures
 * (tests/data/campaign/summary-seed000.json, summary-seed003.json) hold the seeds' table rows with
 * the fixture's numbers; output is deterministic; every summary string is escaped in HTML and the
 * file references nothing outside itself; schema errors name the field; the drift check against
 * a hand-computed table, including a difference exactly at the noise threshold (not beyond);
 * st_report_write's files.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "report/report.h"

#include "../support/fixture.h"

static void assert_has(const char *s, const char *needle)
{
    if (strstr(s, needle) == NULL) {
        fail_msg("output does not contain \"%s\"", needle);
    }
}

static void assert_lacks(const char *s, const char *needle)
{
    const char *p = strstr(s, needle);
    if (p != NULL) {
        fail_msg("output contains \"%s\" at: %.80s", needle, p);
    }
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* The Markdown (html = 0) or HTML report of fixture name, into out; asserts success. */
static void render(const char *name, int html, struct st_buf *out)
{
    struct st_buf in;
    char err[512] = "";
    st_buf_init(&in);
    st_test_fixture(name, &in);
    int rc = html ? st_report_html(in.data, in.len, out, err, sizeof(err))
                  : st_report_md(in.data, in.len, out, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s: %s", name, err);
    }
    st_buf_release(&in);
}

/* ---- seed 000: MTP steps and prefill batch ---- */

static void md_seed000(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-seed000.json", 0, &b);
    const char *s = st_buf_str(&b);
    assert_has(s, "# Campaign report: seed000-mtp\n");
    assert_has(s, "hash `8df46d198d95df25884f45a5230293d8760a4ed06f32bb54a61e1492ae315d38`");
    assert_has(s, "- Noise threshold: 5.00%\n");
    /* Verdicts: arm, what it changed against the baseline, verdict, composite, reasons. */
    assert_has(s, "| arm | changed | verdict | composite | reasons |\n|---|---|---|---:|---|\n");
    assert_has(s, "| baseline | — | baseline | — |  |\n");
    assert_has(s, "| mtp1 | num_speculative_tokens 2 -> 1, cuda_graph_capture_sizes [1, 3] -> "
                  "[1, 2] | **reject** | -11.75% | screening: decode2048.decode_tps@chinese: "
                  "112.61 vs baseline 128.75 (-12.54%), worse beyond the 5.00% noise threshold |");
    assert_has(s, "| mtp3 | num_speculative_tokens 2 -> 3, cuda_graph_capture_sizes [1, 3] -> "
                  "[1, 4] | inconclusive | +1.76% |");
    assert_has(s, "| batch1024 | on baseline: max_num_batched_tokens 2048 -> 1024 | **reject** "
                  "| +0.07% | screening: guard long128k.ttft_s: 17.993 vs baseline 14.426 "
                  "(+24.73%), worse by more than 10.00% |");
    /* The chosen configuration and the restore. */
    assert_has(s, "**baseline**: the baseline stays.");
    assert_has(s, "`num_speculative_tokens=2`");
    assert_has(s, "Restore proven");
    assert_lacks(s, "NOT proven");
    /* Gates. */
    assert_has(s, "| arm | stage | functional | quality | oom | server_exit | context_tokens | "
                  "kv_floor |\n");
    assert_has(s, "| mtp3 | screening | pass | pass | pass | pass | pass | pass |\n");
    /* KV capacity per arm, against the baseline's: 159669 / 146622 - 1 = +8.90%. */
    assert_has(s, "| arm | KV capacity (tokens) | vs baseline | max context (tokens) |\n");
    assert_has(s, "| baseline | 146622 | — | 131072 |\n");
    assert_has(s, "| mtp1 | 159669 | +8.90% | 131072 |\n");
    assert_has(s, "| mtp3 | 137414 | -6.28% | 131072 |\n");
    assert_has(s, "| batch1024 | 155509 | +6.06% | 131072 |\n");
    /* TTFT of the first and the repeated 128K prompt, side by side. */
    assert_has(s, "| arm | long128k | long128k_repeat | text_image |\n");
    assert_has(s, "| baseline | 14.426 (1) | 0.702 (1) | 12.815 (1) |\n");
    assert_has(s, "| batch1024 | 17.993 (1) | 0.854 (1) | 15.955 (1) |\n");
    /* Per-category decode speed: median [min–max] (n). */
    assert_has(s, "#### decode2048\n\n**decode_tps** (tokens/s): median [min–max] (n)\n\n"
                  "| arm | @code | @chinese | @reasoning |\n|---|---:|---:|---:|\n");
    assert_has(s, "| baseline | 123.72 [123.41–124.05] (3) | 128.75 [128.30–129.02] (3) | "
                  "122.11 [121.80–122.64] (3) |\n");
    assert_has(s, "| mtp1 | 109.63 [109.21–110.02] (3) | 112.61 [112.20–113.05] (3) | "
                  "108.28 [107.90–108.71] (3) |\n");
    assert_has(s, "| mtp3 | 123.55 [123.10–123.98] (3) | 134.24 [133.71–134.80] (3) | "
                  "123.53 [123.02–123.90] (3) |\n");
    assert_has(s, "**kv_capacity_tokens** (tokens)");
    assert_has(s, "**spec_accept_rate**: median");
    assert_has(s, "| mtp3 | 3.12 (1) |\n");
    /* TTFT distribution quantiles; nothing about failures or drift. */
    assert_has(s, "| screening | long128k | batch1024 | 1 | 17.993 | 17.993 | 17.993 | 17.993 |");
    assert_lacks(s, "## Failures");
    assert_lacks(s, "## Drift");
    st_buf_release(&b);
}

/* ---- seed 003: TP/PP/DP arms for the 90%-hit workload ---- */

static void md_seed003(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-seed003.json", 0, &b);
    const char *s = st_buf_str(&b);
    assert_has(s, "- Stage screening: baseline, tp2pp4_090, tp4pp2_090, tp8_eagle, "
                  "dp4_attention, dp2_attention\n- Stage full: baseline, tp4pp2_090\n");
    assert_has(s, "| tp4pp2_090 | tp 2 -> 4, pp 4 -> 2, mem_fraction 0.85 -> 0.90 | **promote** "
                  "| +9.85% | screening: hit90.output_tps@cc8: 106.40 vs baseline 92.60 "
                  "(+14.90%), better beyond the 5.00% noise threshold<br>full: ");
    assert_has(s, "**tp4pp2_090** replaces the baseline (tp 2 -> 4, pp 4 -> 2, mem_fraction "
                  "0.85 -> 0.90).");
    /* Throughput by concurrency: points in N order, one repeat in screening, 3 in full. */
    assert_has(s, "### Stage screening\n\n#### hit90\n\n**output_tps** (tokens/s): median "
                  "[min–max] (n)\n\n| arm | @cc1 | @cc2 | @cc3 | @cc4 | @cc8 | @cc16 |\n");
    assert_has(s, "| tp4pp2_090 | 28.80 (1) | 47.50 (1) | 63.90 (1) | 76.20 (1) | 106.40 (1) | "
                  "125.70 (1) |\n");
    assert_has(s, "| baseline | 24.10 (1) | 40.20 (1) | 55.30 (1) | 66.90 (1) | 92.60 (1) | "
                  "124.10 (1) |\n");
    assert_has(s, "| tp4pp2_090 | 28.80 [28.50–29.10] (3) | 47.50 [47.10–47.90] (3) |");
    /* The capacity probe: queued requests per concurrency, integers. */
    assert_has(s, "**queued** (requests): median [min–max] (n)\n\n| arm | @cc2 | @cc4 | @cc6 | "
                  "@cc8 |\n");
    assert_has(s, "| tp8_eagle | 0 (1) | 2 (1) | 4 (1) | 6 (1) |\n");
    assert_has(s, "**hit_rate**: median");
    /* Gates, failures with evidence, KV capacity of the dead arms. */
    assert_has(s, "| tp8_eagle | screening | pass | pass | pass | pass | pass | **FAIL**: "
                  "cap.queued@cc4 = 2, max 0 | **FAIL**: long512k.completed = 0, min 1 | pass |\n");
    assert_has(s, "| dp4_attention | screening | pass | pass | pass | **FAIL**: exit status 1 "
                  "during hit90 | — | — | — | — |\n");
    assert_has(s, "| arm | kind | stage | step | detail | evidence |\n");
    assert_has(s, "| dp4_attention | exit | screening | hit90 | server exited with status 1 "
                  "during hit90@cc1: mlp-sync padding got NoneType (EAGLE x DP) | "
                  "`arms/dp4_attention/screening/server.log` |\n");
    assert_has(s, "| dp2_attention | 215232 | -76.34% | — |\n");
    assert_has(s, "| tp4pp2_090 | 647040 | -28.87% | 1048576 |\n");
    /* The 512K request: TTFT by step in both stages. */
    assert_has(s, "| tp4pp2_090 | 135.800 (1) |\n");
    /* Drift against the earlier campaign: 66.9 / 68.85 - 1 = -2.83%. */
    assert_has(s, "## Drift against an earlier campaign\n\nBaseline compared with "
                  "`../hit90-2026-08-28` (plan hash `7777");
    assert_has(s, ", another plan).");
    assert_has(s, "| hit90.output_tps@cc4 | screening | 66.90 | 68.85 | -2.83% | no |\n");
    assert_has(s, "| hit90.output_tps@cc8 | screening | 92.60 | 91.20 | +1.54% | no |\n");
    assert_has(s, "No drift: none of 2 metrics beyond the noise threshold.");
    st_buf_release(&b);
}

static void md_minimal(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-minimal.json", 0, &b);
    const char *s = st_buf_str(&b);
    assert_has(s, "- **Incomplete**: not every unit ran");
    assert_has(s, "**The restore was NOT proven**: final-state.json does not show the server on "
                  "the chosen configuration. Check the server before relying on it.");
    assert_has(s, "No gate outcome was recorded.");
    assert_has(s, "| baseline | — | — | — |\n");
    assert_lacks(s, "## Measurements");
    st_buf_release(&b);
}

/* ---- HTML ---- */

static void check_self_contained(const char *s)
{
    assert_true(strncmp(s, "<!DOCTYPE html>\n", 16) == 0);
    assert_has(s, "<style>");
    assert_has(s, "</html>\n");
    assert_lacks(s, "http://");
    assert_lacks(s, "https://");
    assert_lacks(s, "src=");
    assert_lacks(s, "href=");
    assert_lacks(s, "url(");
    assert_lacks(s, "@import");
    assert_lacks(s, "<script");
    assert_lacks(s, "<img");
}

static void html_seed000(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-seed000.json", 1, &b);
    const char *s = st_buf_str(&b);
    check_self_contained(s);
    assert_has(s, "<title>Campaign report: seed000-mtp</title>");
    assert_has(s, "<td>mtp1</td><td>num_speculative_tokens 2 -&gt; 1, cuda_graph_capture_sizes "
                  "[1, 3] -&gt; [1, 2]</td><td class=\"verdict-reject\"><strong>reject</strong>"
                  "</td>");
    assert_has(s, "<td class=\"baseline\">baseline</td><td class=\"num\">123.72 [123.41–124.05] "
                  "(3)</td>");
    /* Charts: one bar chart per (stage, step, metric) table: decode_tps, ttft_s (decode2048),
     * long128k, long128k_repeat, text_image, qual, quality_medium, kv_capacity_tokens,
     * spec_accept_rate = 9; a KV chart; one TTFT box chart per step of "ttft" = 3; no ccN. */
    assert_int_equal(count(s, "<svg class=\"chart\""), 13);
    assert_int_equal(count(s, "data-chart=\"bars\""), 9);
    assert_int_equal(count(s, "data-chart=\"kv\""), 1);
    assert_int_equal(count(s, "data-chart=\"ttft\""), 3);
    assert_int_equal(count(s, "data-chart=\"lines\""), 0);
    /* decode_tps: 4 arms x 3 categories, each with a whisker (3 repeats); the baseline's 3 bars
     * are marked. Bars in all: 9 charts' bars + 4 KV bars; the baseline has one in each of the
     * 7 single-point charts. */
    assert_int_equal(count(s, "<rect class=\"bar"), 4 * 3 * 2 + 4 * 7 + 4);
    assert_int_equal(count(s, "<rect class=\"bar baseline\""), 3 * 2 + 7 + 1);
    assert_int_equal(count(s, "<path class=\"whisker\""), 4 * 3 * 2 + 4);
    /* TTFT boxes: decode2048 has 9 requests per arm (a box), the long steps one (a point). */
    assert_int_equal(count(s, "<rect class=\"box\""), 4);
    assert_int_equal(count(s, "<line class=\"median\""), 4);
    assert_int_equal(count(s, "<circle class=\"point\""), 8);
    /* Ticks and labels on the axes. */
    assert_has(s, "<text class=\"tick\"");
    assert_has(s, ">tokens/s</text>");
    assert_has(s, "fill=\"#5f6368\"");
    st_buf_release(&b);
}

static void html_seed003(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-seed003.json", 1, &b);
    const char *s = st_buf_str(&b);
    check_self_contained(s);
    /* ccN tables (screening: hit90 output_tps, hit_rate, cap queued, cap decode_tps; full:
     * hit90 output_tps, cap queued) each get a line chart too. */
    assert_int_equal(count(s, "data-chart=\"lines\""), 6);
    /* hit90 output_tps in screening: 4 arms x 6 points; in full 2 x 6. */
    assert_int_equal(count(s, "<polyline class=\"line\""), 4 + 4 + 4 + 4 + 2 + 2);
    assert_has(s, "<circle class=\"point\" cx=\"98.0\"");
    assert_has(s, "tp4pp2_090 16: 125.70</title>");
    /* Dead arms appear in the KV chart, not in the measurement charts. */
    assert_has(s, "<rect class=\"bar\" x=");
    assert_has(s, "<title>dp4_attention: 96448 [96448, 96448]</title>");
    assert_has(s, "<td><code>arms/dp4_attention/screening/server.log</code></td>");
    assert_has(s, "<td class=\"fail\"><strong>FAIL</strong>: exit status 1 during hit90</td>");
    st_buf_release(&b);
}

static void deterministic(void **state)
{
    (void)state;
    const char *names[] = {"summary-seed000.json", "summary-seed003.json"};
    for (int i = 0; i < 2; i++) {
        for (int html = 0; html < 2; html++) {
            struct st_buf a, b;
            st_buf_init(&a);
            st_buf_init(&b);
            render(names[i], html, &a);
            render(names[i], html, &b);
            assert_int_equal(a.len, b.len);
            assert_memory_equal(a.data, b.data, a.len);
            st_buf_release(&a);
            st_buf_release(&b);
        }
    }
}

static void escaping(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    render("summary-escape.json", 1, &b);
    const char *s = st_buf_str(&b);
    check_self_contained(s);
    assert_has(s, "<title>Campaign report: esc&lt;b&gt;&amp;&quot;&#39;</title>");
    assert_has(s, "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>");
    assert_has(s, "screening: a &lt;script&gt;x&lt;/script&gt; | pipe &amp; &quot;quote&quot; "
                  "see https&#58;//evil.example/p");
    assert_has(s, "&lt;b&gt;oom&lt;/b&gt; at http&#58;//127.0.0.1:8000/x");
    assert_has(s, "<code>arms/x/log&lt;1&gt;.txt</code>");
    assert_has(s, "<title>&lt;script&gt;alert(1)&lt;/script&gt; @cc1: 1.50 [1.50, 1.50]</title>");
    assert_has(s, "x 1 -&gt; &lt;2&gt;");
    assert_lacks(s, "<b>");
    assert_lacks(s, "<i>");
    st_buf_clear(&b);
    /* Markdown: a '|' in a string cannot break the table row. */
    render("summary-escape.json", 0, &b);
    assert_has(st_buf_str(&b), "a <script>x</script> \\| pipe & \"quote\"");
    st_buf_release(&b);
}

/* ---- schema errors ---- */

static void expect_error(const char *text, const char *needle)
{
    struct st_buf out;
    char err[512] = "";
    st_buf_init(&out);
    assert_int_equal(st_report_md(text, strlen(text), &out, err, sizeof(err)), ST_EPARSE);
    if (strstr(err, needle) == NULL) {
        fail_msg("error \"%s\" does not name \"%s\"", err, needle);
    }
    st_buf_clear(&out);
    assert_int_equal(st_report_html(text, strlen(text), &out, err, sizeof(err)), ST_EPARSE);
    st_buf_release(&out);
}

/* The minimal fixture with the first occurrence of from replaced by to. */
static void edited(const char *from, const char *to, struct st_buf *out)
{
    struct st_buf in;
    st_buf_init(&in);
    st_test_fixture("summary-minimal.json", &in);
    const char *p = strstr(st_buf_str(&in), from);
    if (p == NULL) {
        fail_msg("\"%s\" not in the minimal fixture", from);
    }
    st_buf_append(out, in.data, (size_t)(p - in.data));
    st_buf_puts(out, to);
    st_buf_puts(out, p + strlen(from));
    st_buf_release(&in);
}

static void schema_errors(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_test_fixture("summary-broken-verdict.json", &b);
    expect_error(st_buf_str(&b), "missing field 'arms[0].verdict'");
    st_buf_clear(&b);
    st_test_fixture("summary-broken-schema.json", &b);
    expect_error(st_buf_str(&b), "field 'schema': expected \"servetune.campaign.summary/1\"");
    st_buf_clear(&b);
    st_test_fixture("summary-broken-json.json", &b);
    expect_error(st_buf_str(&b), "not valid JSON");
    expect_error("[]", "not a JSON object");

    static const char *const cases[][3] = {
        {"\"noise\": 0.05", "\"noize\": 0.05", "missing field 'plan.noise'"},
        {"\"noise\": 0.05", "\"noise\": \"5%\"", "field 'plan.noise' must be a number"},
        {"\"complete\": false", "\"complete\": 0", "field 'complete' must be true or false"},
        {"\"chosen\": \"baseline\"", "\"chosen\": \"a9\"", "field 'chosen': no arm named 'a9'"},
        {"\"hash\": \"0000", "\"hash\": \"zz00", "field 'plan.hash': expected 64 hex digits"},
        {"\"verdict\": \"baseline\"", "\"verdict\": \"maybe\"",
         "field 'arms[0].verdict': 'maybe' is not one of"},
        {"\"name\": \"baseline\"", "\"name\": \"a1\"", "field 'arms[0].name': the first arm"},
        {"\"failure\": null", "\"failure\": {\"kind\": \"oom\"}",
         "missing field 'arms[0].failure.stage'"},
        {"\"failure\": null", "\"failure\": {\"kind\": \"boom\"}",
         "field 'arms[0].failure.kind': 'boom' is not one of"},
        {"\"params\": {", "\"params\": {\"n\": 1, ", "field 'arms[0].params.n' must be a string"},
        {"\"gates\": []", "\"gates\": [{\"stage\": \"s\", \"name\": \"g\", \"passed\": true}]",
         "missing field 'arms[0].gates[0].detail'"},
        {"\"kv_capacity_tokens\": null", "\"kv_capacity_tokens\": \"x\"",
         "field 'arms[0].kv_capacity_tokens' must be a number or null"},
        {"\"metrics\": []",
         "\"metrics\": [{\"stage\": \"s\", \"arm\": \"baseline\", \"metric\": \"nodot\"}]",
         "field 'metrics[0].metric': 'nodot' is not STEP.METRIC"},
        {"\"metrics\": []",
         "\"metrics\": [{\"stage\": \"s\", \"arm\": \"zz\", \"metric\": \"a.b\"}]",
         "field 'metrics[0].arm': no arm named 'zz'"},
        {"\"metrics\": []",
         "\"metrics\": [{\"stage\": \"s\", \"arm\": \"baseline\", \"metric\": \"a.b\", "
         "\"values\": [1, \"2\"], \"agg\": 1, \"min\": 1, \"max\": 2, \"n\": 2, \"units\": []}]",
         "field 'metrics[0].values[1]' must be a number"},
        {"\"metrics\": []",
         "\"metrics\": [{\"stage\": \"s\", \"arm\": \"baseline\", \"metric\": \"a.b\", "
         "\"values\": [1], \"agg\": 1, \"min\": 1, \"max\": 1, \"n\": 1}]",
         "missing field 'metrics[0].units'"},
        {"\"ttft\": []", "\"ttft\": [{\"stage\": \"s\", \"arm\": \"baseline\", \"step\": \"x\"}]",
         "missing field 'ttft[0].values_s'"},
        {"\"compare\": null", "\"compare\": {\"with\": \"d\", \"plan_hash\": \"h\"}",
         "missing field 'compare.drift'"},
        {"\"stages\": []", "\"stages\": [{\"name\": \"s\"}]", "missing field 'stages[0].arms'"},
        {"\"stages\": []", "\"stages\": [{\"name\": \"s\", \"arms\": [\"baseline\", \"ghost\"]}]",
         "field 'stages[0].arms[1]': no arm named 'ghost'"},
        {"\"decisions\": []",
         "\"decisions\": [{\"stage\": \"s\", \"verdict\": \"win\", \"reason\": \"r\", "
         "\"composite\": 0}]",
         "field 'arms[0].decisions[0].verdict': 'win' is not one of"},
        {"\"decisions\": []\n  }", "\"decisions\": []}, A1, A1",
         "field 'arms[2].name': 'a1' is also arms[1]'s name"},
    };
    static const char a1[] =
        "{\"name\": \"a1\", \"verdict\": \"reject\", \"reasons\": [], \"on\": null, \"params\": "
        "{}, \"changed\": {}, \"kv_capacity_tokens\": null, \"max_context_tokens\": null, "
        "\"failure\": null, \"gates\": [], \"decisions\": []}";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_buf to;
        st_buf_init(&to);
        /* "A1" in a replacement stands for a whole arm named a1. */
        for (const char *p = cases[i][1]; *p != '\0'; p++) {
            if (p[0] == 'A' && p[1] == '1') {
                st_buf_puts(&to, a1);
                p++;
            } else {
                st_buf_putc(&to, *p);
            }
        }
        st_buf_clear(&b);
        edited(cases[i][0], st_buf_str(&to), &b);
        st_buf_release(&to);
        expect_error(st_buf_str(&b), cases[i][2]);
    }
    st_buf_release(&b);
}

/* Numbers no chart can place (1e999 reads as infinity, 1e300 spans): the tables say so, the
 * charts leave them out and never print a non-finite coordinate. */
static void extreme_values(void **state)
{
    (void)state;
    struct st_buf in, out;
    char err[512] = "";
    st_buf_init(&in);
    st_buf_init(&out);
    edited("\"metrics\": []",
           "\"metrics\": [{\"stage\": \"s\", \"arm\": \"baseline\", \"metric\": "
           "\"a.output_tps@cc1\", \"values\": [1e999], \"agg\": 1e999, \"min\": 1e999, "
           "\"max\": 1e999, \"n\": 1, \"units\": []}, {\"stage\": \"s\", \"arm\": "
           "\"baseline\", \"metric\": \"a.output_tps@cc2\", \"values\": [-1e300, 1e300], "
           "\"agg\": 0, \"min\": -1e300, \"max\": 1e300, \"n\": 2, \"units\": []}]",
           &in);
    assert_int_equal(st_report_md(in.data, in.len, &out, err, sizeof(err)), 0);
    assert_has(st_buf_str(&out), "| baseline | inf (1) | 0.00 [-1e+300–1e+300] (2) |\n");
    st_buf_clear(&out);
    assert_int_equal(st_report_html(in.data, in.len, &out, err, sizeof(err)), 0);
    const char *svg = strstr(st_buf_str(&out), "<svg");
    assert_non_null(svg);
    assert_lacks(svg, "nan");
    assert_lacks(svg, "inf");
    assert_int_equal(count(svg, "<rect class=\"bar"), 1);
    assert_int_equal(count(svg, "<path class=\"whisker\""), 0);
    st_buf_release(&in);
    st_buf_release(&out);
}

/* ---- the drift check ---- */

/* A summary whose baseline has the given metrics ("STAGE NAME VALUE" each), plus an arm a1 with
 * decode2048.decode_tps@code = 1 (never compared: not the baseline). */
static void summary_with(struct st_buf *b, const char *hash, const char *const *ms, size_t n)
{
    st_buf_printf(b,
                  "{\"schema\": \"servetune.campaign.summary/1\", \"plan\": {\"name\": \"p\", "
                  "\"hash\": \"%s\", \"file\": \"plan.yaml\", \"noise\": 0.05}, \"complete\": "
                  "true, \"chosen\": \"baseline\", \"restored\": true, \"stages\": [], \"arms\": "
                  "[",
                  hash);
    const char *names[] = {"baseline", "a1"};
    for (int i = 0; i < 2; i++) {
        st_buf_printf(b,
                      "%s{\"name\": \"%s\", \"verdict\": \"%s\", \"reasons\": [], \"on\": null, "
                      "\"params\": {}, \"changed\": {}, \"kv_capacity_tokens\": null, "
                      "\"max_context_tokens\": null, \"failure\": null, \"gates\": [], "
                      "\"decisions\": []}",
                      i ? ", " : "", names[i], i ? "reject" : "baseline");
    }
    st_buf_puts(b, "], \"metrics\": [{\"stage\": \"screening\", \"arm\": \"a1\", \"metric\": "
                   "\"decode2048.decode_tps@code\", \"values\": [1], \"agg\": 1, \"min\": 1, "
                   "\"max\": 1, \"n\": 1, \"units\": []}");
    for (size_t i = 0; i < n; i++) {
        char stage[32], name[64];
        double v;
        assert_int_equal(sscanf(ms[i], "%31s %63s %lf", stage, name, &v), 3);
        st_buf_printf(b,
                      ", {\"stage\": \"%s\", \"arm\": \"baseline\", \"metric\": \"%s\", "
                      "\"values\": [%.17g], \"agg\": %.17g, \"min\": %.17g, \"max\": %.17g, "
                      "\"n\": 1, \"units\": [\"u1\"]}",
                      stage, name, v, v, v, v);
    }
    st_buf_puts(b, "], \"ttft\": [], \"compare\": null}");
}

static const char hash_a[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char hash_b[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void compare_table(void **state)
{
    (void)state;
    /*
     * Hand-computed, noise 0.05:
     *   screening decode_tps@code 105 vs 100: rel +0.05 exactly (0.050000000000000044 in
     *     binary): at the threshold, not beyond;
     *   screening decode_tps@chinese 95 vs 100: -0.05 exactly: not beyond;
     *   screening decode_tps@reasoning 94 vs 100: -0.06: beyond;
     *   full decode_tps@code 200 vs 100: +1.00: beyond (same metric, other stage);
     *   screening long128k.ttft_s 0 vs 0: rel 0, not beyond;
     *   screening text_image.ttft_s 1 vs 0: infinite (written null), beyond;
     *   screening only_here.x 5: not in then, skipped; then's only_there.x: skipped.
     */
    const char *this_m[] = {
        "screening decode2048.decode_tps@code 105",
        "screening decode2048.decode_tps@chinese 95",
        "screening decode2048.decode_tps@reasoning 94",
        "full decode2048.decode_tps@code 200",
        "screening long128k.ttft_s 0",
        "screening text_image.ttft_s 1",
        "screening only_here.x 5",
    };
    const char *then_m[] = {
        "screening only_there.x 5",
        "full decode2048.decode_tps@code 100",
        "screening decode2048.decode_tps@code 100",
        "screening decode2048.decode_tps@chinese 100",
        "screening decode2048.decode_tps@reasoning 100",
        "screening long128k.ttft_s 0",
        "screening text_image.ttft_s 0",
    };
    struct st_buf a, b, out, md;
    st_buf_init(&a);
    st_buf_init(&b);
    st_buf_init(&out);
    st_buf_init(&md);
    summary_with(&a, hash_a, this_m, 7);
    summary_with(&b, hash_b, then_m, 7);
    char err[512] = "";
    int drifted = -1;
    int rc = st_report_compare(a.data, a.len, b.data, b.len, "../old", 0.05, &out, &drifted, err,
                               sizeof(err));
    if (rc != 0) {
        fail_msg("compare: %s", err);
    }
    assert_int_equal(drifted, 1);
    struct st_json j;
    st_json_init(&j, 0);
    assert_int_equal(st_json_parse(&j, out.data, out.len), 0);
    assert_true(st_json_streq(&j, st_json_get(&j, 0, "with"), "../old"));
    assert_true(st_json_streq(&j, st_json_get(&j, 0, "plan_hash"), hash_b));
    assert_int_equal(st_json_bool(&j, st_json_get(&j, 0, "drifted")), 1);
    int arr = st_json_get(&j, 0, "drift");
    assert_int_equal(j.toks[arr].size, 6);
    static const struct {
        const char *metric, *stage;
        double this_v, then_v, rel;
        int beyond;
    } want[] = {
        {"decode2048.decode_tps@code", "screening", 105, 100, 0.05, 0},
        {"decode2048.decode_tps@chinese", "screening", 95, 100, -0.05, 0},
        {"decode2048.decode_tps@reasoning", "screening", 94, 100, -0.06, 1},
        {"decode2048.decode_tps@code", "full", 200, 100, 1.0, 1},
        {"long128k.ttft_s", "screening", 0, 0, 0, 0},
        {"text_image.ttft_s", "screening", 1, 0, INFINITY, 1},
    };
    for (uint32_t i = 0; i < 6; i++) {
        int e = st_json_at(&j, arr, i);
        double v;
        assert_true(st_json_streq(&j, st_json_get(&j, e, "metric"), want[i].metric));
        assert_true(st_json_streq(&j, st_json_get(&j, e, "stage"), want[i].stage));
        assert_int_equal(st_json_f64(&j, st_json_get(&j, e, "this"), &v), 0);
        assert_true(v == want[i].this_v);
        assert_int_equal(st_json_f64(&j, st_json_get(&j, e, "then"), &v), 0);
        assert_true(v == want[i].then_v);
        int rt = st_json_get(&j, e, "rel");
        if (isinf(want[i].rel)) {
            assert_int_equal(st_json_type(&j, rt), ST_JSON_NULL);
        } else {
            assert_int_equal(st_json_f64(&j, rt, &v), 0);
            assert_true(fabs(v - want[i].rel) < 1e-12);
        }
        assert_int_equal(st_json_bool(&j, st_json_get(&j, e, "beyond")), want[i].beyond);
    }
    st_json_release(&j);
    /* The printed table. */
    assert_int_equal(st_report_drift_md(out.data, out.len, &md, err, sizeof(err)), 0);
    const char *s = st_buf_str(&md);
    assert_has(s, "| metric | stage | this | then | change | beyond |\n");
    assert_has(s, "| decode2048.decode_tps@code | screening | 105.00 | 100.00 | +5.00% | no |\n");
    assert_has(s, "| decode2048.decode_tps@chinese | screening | 95.00 | 100.00 | -5.00% | no |\n");
    assert_has(s, "| decode2048.decode_tps@reasoning | screening | 94.00 | 100.00 | -6.00% | "
                  "**yes** |\n");
    assert_has(s, "| decode2048.decode_tps@code | full | 200.00 | 100.00 | +100.00% | **yes** |\n");
    assert_has(s, "| text_image.ttft_s | screening | 1.000 | 0.000 | n/a | **yes** |\n");
    assert_has(s, "**Drifted: 3 of 6 metrics beyond the noise threshold.**");

    /* Nothing beyond: the same summary against itself. */
    st_buf_clear(&out);
    assert_int_equal(st_report_compare(a.data, a.len, a.data, a.len, "x", 0.05, &out, &drifted, err,
                                       sizeof(err)),
                     0);
    assert_int_equal(drifted, 0);
    assert_has(st_buf_str(&out), "\"drifted\":false");

    /* A broken earlier summary is named as such. */
    st_buf_clear(&out);
    assert_int_equal(
        st_report_compare(a.data, a.len, "{}", 2, "x", 0.05, &out, &drifted, err, sizeof(err)),
        ST_EPARSE);
    assert_has(err, "the earlier summary: missing field 'schema'");
    assert_int_equal(
        st_report_compare("{", 1, a.data, a.len, "x", 0.05, &out, &drifted, err, sizeof(err)),
        ST_EPARSE);
    assert_has(err, "this summary: not valid JSON");
    st_buf_release(&a);
    st_buf_release(&b);
    st_buf_release(&out);
    st_buf_release(&md);
}

/* ---- files ---- */

static void write_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-report-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[512] = "";
    struct st_buf in, want, got;
    st_buf_init(&in);
    st_buf_init(&want);
    st_buf_init(&got);

    /* No summary: the file is named, the error is errno's. */
    assert_int_equal(st_report_write(dir, 1, err, sizeof(err)), -ENOENT);
    assert_has(err, "/summary.json: ");

    st_test_fixture("summary-seed000.json", &in);
    snprintf(path, sizeof(path), "%s/summary.json", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(in.data, 1, in.len, f), in.len);
    fclose(f);
    assert_int_equal(st_report_write(dir, 0, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/report.html", dir);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(st_report_write(dir, 1, err, sizeof(err)), 0);
    const char *names[] = {"report.md", "report.html"};
    for (int i = 0; i < 2; i++) {
        st_buf_clear(&want);
        st_buf_clear(&got);
        int rc = i ? st_report_html(in.data, in.len, &want, err, sizeof(err))
                   : st_report_md(in.data, in.len, &want, err, sizeof(err));
        assert_int_equal(rc, 0);
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        f = fopen(path, "rb");
        assert_non_null(f);
        char chunk[8192];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            st_buf_append(&got, chunk, n);
        }
        fclose(f);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.data, want.data, got.len);
        unlink(path);
    }
    /* A summary that is not one: ST_EPARSE, the file and the field named. */
    snprintf(path, sizeof(path), "%s/summary.json", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"schema\": \"servetune.campaign.summary/1\"}", f);
    fclose(f);
    assert_int_equal(st_report_write(dir, 1, err, sizeof(err)), ST_EPARSE);
    assert_has(err, "/summary.json: missing field 'plan'");
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
    st_buf_release(&in);
    st_buf_release(&want);
    st_buf_release(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(md_seed000),     cmocka_unit_test(md_seed003),
        cmocka_unit_test(md_minimal),     cmocka_unit_test(html_seed000),
        cmocka_unit_test(html_seed003),   cmocka_unit_test(deterministic),
        cmocka_unit_test(escaping),       cmocka_unit_test(schema_errors),
        cmocka_unit_test(extreme_values), cmocka_unit_test(compare_table),
        cmocka_unit_test(write_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
