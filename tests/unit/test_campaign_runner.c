/*
 * Tests for the campaign runner (src/campaign/runner.c and rnjournal.c), what it decides before
 * a server starts: `run` refuses an archive that already holds a campaign, a missing, oversized
 * or broken plan (leaving no journal behind); `resume` refuses a folder with no journal, a
 * journal with no campaign record, a plan edited after registration, a journal another runner
 * holds and a completed unit whose result cannot be read back (changing nothing); each with its
 * code and a message saying what to do; and every call puts the caller's SIGINT/SIGTERM handlers
 * back. The rest of the procedure runs real servers and is covered by tests/e2e/.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "campaign/plan.h"
#include "campaign/runner.h"
#include "store/journal.h"

static const char small_plan[] = "name: t\n"
                                 "target:\n"
                                 "  kind: sim\n"
                                 "  profile: p.yaml\n"
                                 "baseline:\n"
                                 "  steps: 2\n"
                                 "arms:\n"
                                 "  - name: a1\n"
                                 "    set: {steps: 3}\n"
                                 "stages:\n"
                                 "  screening:\n"
                                 "    - {id: dec, kind: bench, output_tokens: 64}\n"
                                 "  full:\n"
                                 "    - {id: long, kind: bench, output_tokens: 16384}\n"
                                 "    - {id: mixed, kind: soak, duration_s: 600}\n"
                                 "rules:\n"
                                 "  metrics:\n"
                                 "    - {metric: dec.decode_tps}\n";

struct tmp {
    char dir[64];
    char out[128];  /* dir/out: the archive */
    char plan[128]; /* dir/plan.yaml */
};

static void tmp_make(struct tmp *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/st_runner_XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->out, sizeof(t->out), "%s/out", t->dir);
    snprintf(t->plan, sizeof(t->plan), "%s/plan.yaml", t->dir);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_rf(const char *path)
{
    assert_int_equal(nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static int exists(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int g_caller_signals;

static void caller_handler(int sig)
{
    (void)sig;
    g_caller_signals++;
}

/* Runs the runner with the caller's own handlers installed, checks they are back afterwards and
 * that a refused call leaves end at DONE (nothing ran). */
static int run(const char *plan, const char *out, int resume, char *err, size_t errlen)
{
    struct sigaction sa, old_int, old_term, now;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = caller_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGINT, &sa, &old_int), 0);
    assert_int_equal(sigaction(SIGTERM, &sa, &old_term), 0);

    struct st_runner_opts o;
    memset(&o, 0, sizeof(o));
    o.plan_path = plan;
    o.out_dir = out;
    o.resume = resume;
    o.self_exe = "/nonexistent/servetune"; /* nothing may start */
    o.nvidia_smi = "";
    enum st_runner_end end = ST_RUNNER_INTERRUPTED;
    err[0] = '\0';
    struct st_runner *rn = st_runner_new();
    int rc = st_runner_run(rn, &o, &end, err, errlen);
    st_runner_free(rn);
    assert_int_equal(end, ST_RUNNER_DONE);

    assert_int_equal(sigaction(SIGINT, NULL, &now), 0);
    assert_ptr_equal(now.sa_handler, caller_handler);
    assert_int_equal(sigaction(SIGTERM, NULL, &now), 0);
    assert_ptr_equal(now.sa_handler, caller_handler);
    assert_int_equal(sigaction(SIGINT, &old_int, NULL), 0);
    assert_int_equal(sigaction(SIGTERM, &old_term, NULL), 0);
    assert_int_equal(g_caller_signals, 0);
    return rc;
}

static void test_run_refuses_existing_archive(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    write_text(t.plan, small_plan, strlen(small_plan));
    assert_int_equal(mkdir(t.out, 0755), 0);
    char jpath[256];
    snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", t.out);
    write_text(jpath, "", 0);
    char err[512];
    assert_int_equal(run(t.plan, t.out, 0, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "already holds a campaign"));
    assert_non_null(strstr(err, "servetune campaign resume"));
    rm_rf(t.dir);
}

static void test_run_missing_plan(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    char err[512];
    assert_int_equal(run(t.plan, t.out, 0, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, t.plan));
    assert_false(exists(t.out, "journal.jsonl"));
    rm_rf(t.dir);
}

static void test_run_plan_too_big(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    size_t len = ST_PLAN_MAX_BYTES + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, '#', len);
    write_text(t.plan, big, len);
    free(big);
    char err[512];
    assert_int_equal(run(t.plan, t.out, 0, err, sizeof(err)), ST_ETOOBIG);
    assert_non_null(strstr(err, "over 1048576 bytes"));
    assert_false(exists(t.out, "journal.jsonl"));
    rm_rf(t.dir);
}

static void test_run_broken_plan(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    const char *bad[] = {
        "name: [unclosed\n",              /* not YAML */
        "name: t\ntarget: {kind: sim}\n", /* no stages, no rules */
        "name: t\nno_such_key: 1\n",      /* an unknown key */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_text(t.plan, bad[i], strlen(bad[i]));
        char err[512];
        int rc = run(t.plan, t.out, 0, err, sizeof(err));
        assert_true(rc == ST_EPARSE || rc == ST_EUSAGE);
        assert_non_null(strstr(err, "plan.yaml"));
        assert_false(exists(t.out, "journal.jsonl"));
    }
    rm_rf(t.dir);
}

static void test_resume_without_journal(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    assert_int_equal(mkdir(t.out, 0755), 0);
    char err[512];
    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "no campaign here"));
    assert_non_null(strstr(err, "servetune campaign run"));
    assert_false(exists(t.out, "journal.jsonl"));
    rm_rf(t.dir);
}

/* A journal in out whose first record is `kind` with json. */
static void journal_with(const struct tmp *t, const char *kind, const char *json)
{
    char jpath[256], err[256];
    snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", t->out);
    struct st_journal j;
    memset(&j, 0, sizeof(j));
    assert_int_equal(st_journal_open(&j, jpath, err, sizeof(err)), 0);
    assert_int_equal(st_journal_append(&j, kind, json, strlen(json)), 0);
    assert_int_equal(st_journal_close(&j), 0);
}

static void test_resume_without_campaign_record(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    assert_int_equal(mkdir(t.out, 0755), 0);
    journal_with(&t, "note", "{\"x\":1}");
    char err[512];
    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "has no campaign record"));
    rm_rf(t.dir);
}

static void test_resume_refuses_edited_plan(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    assert_int_equal(mkdir(t.out, 0755), 0);
    char hash[ST_SHA256_HEX + 64];
    memset(hash, '0', 64);
    hash[64] = '\0';
    char json[256];
    snprintf(json, sizeof(json), "{\"plan_hash\":\"%s\",\"seed\":1}", hash);
    journal_with(&t, "campaign", json);
    char ppath[256];
    snprintf(ppath, sizeof(ppath), "%s/plan.yaml", t.out);
    write_text(ppath, small_plan, strlen(small_plan));
    char err[512];
    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "was edited after the campaign started"));
    assert_non_null(strstr(err, "registered 0000000000000000..."));
    /* A registered plan that no longer parses is refused with its position. */
    write_text(ppath, "name: t\n", 8);
    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "plan.yaml:"));
    rm_rf(t.dir);
}

static void test_resume_refuses_held_journal(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    assert_int_equal(mkdir(t.out, 0755), 0);
    char jpath[256], err[512];
    snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", t.out);
    struct st_journal held;
    memset(&held, 0, sizeof(held));
    assert_int_equal(st_journal_open(&held, jpath, err, sizeof(err)), 0);
    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "another servetune is running this campaign"));
    assert_int_equal(st_journal_close(&held), 0);
    rm_rf(t.dir);
}

static size_t read_all(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    assert_true(n < cap);
    assert_int_equal(fclose(f), 0);
    return n;
}

/* A completed unit whose unit_end holds no result object (here null) is refused by name, and the
 * resume changes nothing: it used to be skipped without a word, its data left out of the
 * decisions, and the campaign went on past it. */
static void test_resume_refuses_unreadable_unit(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    assert_int_equal(mkdir(t.out, 0755), 0);
    char ppath[256], jpath[256], err[512];
    snprintf(ppath, sizeof(ppath), "%s/plan.yaml", t.out);
    snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", t.out);
    write_text(ppath, small_plan, strlen(small_plan));
    struct st_plan p;
    memset(&p, 0, sizeof(p));
    assert_int_equal(st_plan_parse(ppath, small_plan, strlen(small_plan), &p, err, sizeof(err)), 0);
    char hex[ST_SHA256_HEX];
    st_plan_hash(&p, hex);
    st_plan_release(&p);

    struct st_journal j;
    memset(&j, 0, sizeof(j));
    assert_int_equal(st_journal_open(&j, jpath, err, sizeof(err)), 0);
    char json[256];
    snprintf(json, sizeof(json), "{\"plan_hash\":\"%s\",\"seed\":1}", hex);
    assert_int_equal(st_journal_append(&j, "campaign", json, strlen(json)), 0);
    static const char *const units[][2] = {
        {"state", "{}"},
        {"screening/baseline/up", "{\"fail\":\"\",\"detail\":\"\"}"},
        {"screening/baseline/dec/r1", "null"},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        assert_int_equal(st_journal_unit_begin(&j, units[i][0]), 0);
        assert_int_equal(st_journal_unit_end(&j, units[i][0], units[i][1], strlen(units[i][1])), 0);
    }
    assert_int_equal(st_journal_close(&j), 0);
    static char before[1 << 16], after[1 << 16];
    size_t nb = read_all(jpath, before, sizeof(before));

    assert_int_equal(run(NULL, t.out, 1, err, sizeof(err)), ST_EPARSE);
    assert_non_null(
        strstr(err, "the completed unit screening/baseline/dec/r1 cannot be read back"));
    assert_non_null(strstr(err, "line 8"));
    assert_non_null(strstr(err, "changes nothing"));
    size_t na = read_all(jpath, after, sizeof(after));
    assert_int_equal(na, nb);
    assert_memory_equal(after, before, nb);
    assert_false(exists(t.out, "void"));
    assert_false(exists(t.out, "summary.json"));
    rm_rf(t.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_refuses_existing_archive),
        cmocka_unit_test(test_run_missing_plan),
        cmocka_unit_test(test_run_plan_too_big),
        cmocka_unit_test(test_run_broken_plan),
        cmocka_unit_test(test_resume_without_journal),
        cmocka_unit_test(test_resume_without_campaign_record),
        cmocka_unit_test(test_resume_refuses_edited_plan),
        cmocka_unit_test(test_resume_refuses_held_journal),
        cmocka_unit_test(test_resume_refuses_unreadable_unit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
