/*
 * Tests for src/target/watch.c: nvidia-smi CSV (the fixture's two GPUs, placeholders, blank
 * lines, the GPU cap, malformed lines), /proc/vmstat's oom_kill (a fixture with a look-alike
 * name before it, absent, malformed), and a watch with no server (a refused loopback port), the
 * fake nvidia-smi of tests/data/campaign and a vmstat file the test rewrites: the scrape errors
 * are counted, the GPU peak comes from the CSV, and a rising oom_kill makes the tick return 1.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "target/watch.h"

#include "../support/fixture.h"

static const char *data_dir(void)
{
    const char *d = getenv("ST_TEST_DATA");
    return d ? d : "tests/data";
}

/* Reads tests/data/campaign/name into b (replacing what it held). */
static void load(const char *name, struct st_buf *b)
{
    st_buf_clear(b);
    st_test_fixture(name, b);
}

static int nvsmi(const char *s, struct st_watch_gpu *g, size_t max)
{
    return st_watch_parse_nvsmi(s, strlen(s), g, max);
}

static void test_nvsmi_fixture(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    load("nvsmi-2gpu.csv", &b);
    struct st_watch_gpu g[4];
    assert_int_equal(st_watch_parse_nvsmi(b.data, b.len, g, 4), 2);
    assert_int_equal(g[0].index, 0);
    assert_int_equal(g[0].mem_used_bytes, 81234ull * 1048576); /* MiB, nounits */
    assert_int_equal(g[0].mem_total_bytes, 97887ull * 1048576);
    assert_true(g[0].util_pct == 87 && g[0].temp_c == 64);
    assert_int_equal(g[1].index, 1);
    assert_int_equal(g[1].mem_used_bytes, 1024ull * 1048576);
    assert_true(g[1].util_pct == -1); /* [N/A] */
    assert_true(g[1].temp_c == 41);
    /* Only max are kept; the count says so. */
    assert_int_equal(st_watch_parse_nvsmi(b.data, b.len, g, 1), 1);
    st_buf_release(&b);
}

static void test_nvsmi_forms(void **state)
{
    (void)state;
    struct st_watch_gpu g[4];
    assert_int_equal(nvsmi("", g, 4), 0);
    assert_int_equal(nvsmi("\n  \n", g, 4), 0);
    /* CRLF, tabs, no final newline, a fraction, [Not Supported]. */
    assert_int_equal(nvsmi("3,\t10.5 ,20,[Not Supported],[N/A]\r\n\n7,1,2,3,4", g, 4), 2);
    assert_int_equal(g[0].index, 3);
    assert_int_equal(g[0].mem_used_bytes, 11010048); /* 10.5 MiB */
    assert_true(g[0].util_pct == -1 && g[0].temp_c == -1);
    assert_int_equal(g[1].index, 7);
    /* Malformed: fields missing or extra, words, an empty field, a bad index, a header line. */
    assert_int_equal(nvsmi("0, 1, 2, 3\n", g, 4), -1);
    assert_int_equal(nvsmi("0, 1, 2, 3, 4, 5\n", g, 4), -1);
    assert_int_equal(nvsmi("0, lots, 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("0, , 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("[N/A], 1, 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("-1, 1, 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("1.5, 1, 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("0, 1, 2, 3, 4\nindex, memory.used [MiB], b, c, d\n", g, 4), -1);
    assert_int_equal(nvsmi("0, 1e400, 2, 3, 4\n", g, 4), -1);
    /* Memory past 2^64 bytes (2^44 MiB): rejected, not cast out of range (fuzz_watch). */
    assert_int_equal(nvsmi("0, 17592186044416, 2, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("0, 1, 100000000000000000000000000000, 3, 4\n", g, 4), -1);
    assert_int_equal(nvsmi("0, 17592186044415, 17592186044415.5, 3, 4\n", g, 4), 1);
    assert_true(g[0].mem_used_bytes == 18446744073708503040ull);
    assert_int_equal(nvsmi("NVIDIA-SMI has failed because it couldn't communicate\n", g, 4), -1);
}

static void test_vmstat(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    load("vmstat.txt", &b);
    uint64_t v = 0;
    /* oom_kill_other comes first and must not be taken for oom_kill. */
    assert_int_equal(st_watch_parse_vmstat(b.data, b.len, &v), 0);
    assert_int_equal(v, 3);
    st_buf_release(&b);
    const char *s = "pgfault 1\noom_kill 18446744073709551615";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), 0);
    assert_true(v == UINT64_MAX);
    s = "oom_kill 18446744073709551616\n";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), -1);
    s = "pgfault 1\n";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), -1);
    s = "oom_kill x\n";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), -1);
    s = "oom_kill 12abc\n";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), -1);
    s = "oom_kill\n";
    assert_int_equal(st_watch_parse_vmstat(s, strlen(s), &v), -1);
    assert_int_equal(st_watch_parse_vmstat("", 0, &v), -1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_watch_offline(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-watch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char vm[256], smi[1024], jsonl[256];
    snprintf(vm, sizeof(vm), "%s/vmstat", dir);
    snprintf(jsonl, sizeof(jsonl), "%s/watch.jsonl", dir);
    snprintf(smi, sizeof(smi), "%s/campaign/fake-nvidia-smi", data_dir());
    write_file(vm, "oom_kill 5\n");
    /* Port 1 on loopback: refused at once, so every scrape is an error, not a wait. */
    struct st_watch_cfg cfg = {
        .url = "http://127.0.0.1:1", .dir = dir, .nvidia_smi = smi, .vmstat = vm, .interval_s = 60};
    struct st_watch *w = NULL;
    char err[256];
    assert_int_equal(st_watch_new(&cfg, &w, err, sizeof(err)), 0);
    uint64_t t = st_clock_mono_ns();
    /* Within the interval: no sample, no rise. */
    assert_int_equal(st_watch_tick(w, t), 0);
    write_file(vm, "oom_kill 7\n");
    assert_int_equal(st_watch_tick(w, t + 1000), 0); /* not sampled yet */
    assert_int_equal(st_watch_tick(w, t + 61 * ST_NS_PER_S), 1);
    struct st_watch_summary s;
    st_watch_finish(w, &s);
    st_watch_free(w);
    assert_int_equal(s.samples, 0);
    assert_int_equal(s.scrape_errors, 3); /* new, the late tick, finish */
    assert_true(s.spec_accept_rate == -1 && s.prefix_hit_rate == -1 && s.kv_usage_max == -1);
    assert_int_equal(s.n_gpus, 2);
    assert_int_equal(s.gpu_mem_max_bytes, 81234ull * 1048576);
    assert_true(s.gpu_temp_max_c == 64);
    assert_int_equal(s.oom_kills, 2);

    /* Three lines, each one JSON object with the GPUs and the counter. */
    struct st_buf b;
    st_buf_init(&b);
    FILE *f = fopen(jsonl, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        n++;
        assert_non_null(strstr(line, "\"metrics\":{\"ok\":false,\"error\":"));
        assert_non_null(strstr(line, "\"mem_used_bytes\":85180022784"));
        assert_non_null(strstr(line, n == 1 ? "\"oom_kill\":5}" : "\"oom_kill\":7}"));
    }
    fclose(f);
    assert_int_equal(n, 3);

    st_watch_summary_json(&s, &b);
    assert_string_equal(st_buf_str(&b),
                        "{\"samples\":0,\"scrape_errors\":3,\"spec_accept_rate\":null,"
                        "\"spec_accept_len\":null,\"prefix_hit_rate\":null,\"preemptions\":null,"
                        "\"kv_usage_max\":null,\"waiting_max\":0,\"gpu_mem_max_bytes\":"
                        "85180022784,\"gpu_temp_max_c\":64,\"n_gpus\":2,\"oom_kills\":2}");
    st_buf_release(&b);

    /* Disabled sources: nothing but the scrape. A missing nvidia-smi path is not an error. */
    unlink(jsonl);
    cfg.nvidia_smi = "";
    cfg.vmstat = "";
    assert_int_equal(st_watch_new(&cfg, &w, err, sizeof(err)), 0);
    st_watch_finish(w, &s);
    st_watch_free(w);
    assert_int_equal(s.n_gpus, 0);
    assert_int_equal(s.gpu_mem_max_bytes, 0);
    assert_true(s.gpu_temp_max_c == -1);
    assert_int_equal(s.oom_kills, -1); /* no vmstat: unknown, not 0 */
    st_buf_init(&b);
    st_watch_summary_json(&s, &b);
    assert_non_null(strstr(st_buf_str(&b), "\"oom_kills\":null"));
    st_buf_release(&b);
    cfg.nvidia_smi = "/nonexistent/nvidia-smi";
    assert_int_equal(st_watch_new(&cfg, &w, err, sizeof(err)), 0);
    st_watch_finish(w, &s);
    st_watch_free(w);
    assert_int_equal(s.n_gpus, 0);
    unlink(jsonl);
    unlink(vm);
    /* A folder that does not exist: an error naming the file. */
    char missing[300];
    snprintf(missing, sizeof(missing), "%s/none", dir);
    cfg.dir = missing;
    assert_int_equal(st_watch_new(&cfg, &w, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "none/watch.jsonl"));
    assert_null(w);
    st_watch_free(NULL);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvsmi_fixture),
        cmocka_unit_test(test_nvsmi_forms),
        cmocka_unit_test(test_vmstat),
        cmocka_unit_test(test_watch_offline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
