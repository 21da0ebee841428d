/*
 * servetune report DIR [--html] [--compare-with DIR2]: the campaign reports of an audit archive,
 * made from DIR/summary.json alone (src/report/report.c): DIR/report.md, and with --html the
 * one-file DIR/report.html. --compare-with checks this campaign's baseline against an earlier
 * one's (DIR2/summary.json): prints the drift table, writes DIR/compare.json and exits 1 when a
 * metric moved beyond this plan's noise threshold. Exit: 0 written (no drift), 1 drifted, 2 bad
 * usage or a summary that cannot be read or is not one, 3 a file could not be written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "report/report.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "store/fsutil.h"

#define CMD "servetune report"
#define SUMMARY_MAX (256u << 20)

static void usage(FILE *f)
{
    fputs("usage: servetune report DIR [--html] [--compare-with DIR2]\n"
          "\n"
          "Writes the reports of a campaign archive from DIR/summary.json: DIR/report.md\n"
          "(verdicts, chosen configuration, gates, failures, KV capacity, TTFT, one table per\n"
          "step and metric) and, with --html, DIR/report.html (one self-contained file with\n"
          "charts; no script, nothing fetched).\n"
          "\n"
          "  --html               also write DIR/report.html\n"
          "  --compare-with DIR2  compare this baseline with DIR2/summary.json's: print the\n"
          "                       drift table, write DIR/compare.json, exit 1 when a metric\n"
          "                       moved beyond the plan's noise threshold\n"
          "  -h, --help           this text\n"
          "\n"
          "Exit: 0 written, 1 drifted, 2 bad usage or summary, 3 could not write.\n",
          f);
}

struct ropts {
    const char *dir;
    const char *with;
    int html;
};

/* 1 when arg is --compare-with (or an abbreviation getopt_long accepts) without "=VALUE". */
static int takes_next(const char *arg)
{
    static const char name[] = "--compare-with";
    size_t n = strlen(arg);
    return n >= 3 && n <= sizeof(name) - 1 && strncmp(arg, name, n) == 0;
}

/*
 * st_cli_parse refuses operands here, so DIR is taken out first: the one argument that is not
 * an option nor --compare-with's value. Returns the count of operands found (the first in *dir);
 * rest gets the other arguments, rest[0] the command name.
 */
static int split_operands(int argc, char **argv, char **rest, int *nrest, const char **dir)
{
    int found = 0, n = 0, opts_done = 0;
    rest[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = 1;
            continue;
        }
        if (!opts_done && a[0] == '-' && a[1] != '\0') {
            rest[n++] = argv[i];
            if (takes_next(a) && i + 1 < argc) {
                rest[n++] = argv[++i];
            }
            continue;
        }
        if (found++ == 0) {
            *dir = a;
        }
    }
    rest[n] = NULL;
    *nrest = n;
    return found;
}

/* The plan's noise threshold from summary text (0.05 when it cannot be read: the report
 * functions then refuse the summary with a better message). */
static double plan_noise(const struct st_buf *text)
{
    struct st_json j;
    double noise = 0.05;
    st_json_init(&j, 0);
    if (st_json_parse(&j, st_buf_str(text), text->len) == 0) {
        int plan = st_json_get(&j, 0, "plan");
        int t = st_json_get(&j, plan, "noise");
        double v;
        if (t >= 0 && st_json_f64(&j, t, &v) == 0) {
            noise = v;
        }
    }
    st_json_release(&j);
    return noise;
}

static int read_summary(const char *dir, struct st_buf *text, struct st_buf *path)
{
    char err[1024] = "";
    st_buf_clear(path);
    st_buf_printf(path, "%s/summary.json", dir);
    if (st_cli_read_file(st_buf_str(path), SUMMARY_MAX, text, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s (expected a campaign archive: DIR/summary.json)\n", err);
        return -1;
    }
    return 0;
}

/* --compare-with: drift table on stdout, DIR/compare.json. Returns the exit code. */
static int compare(const struct ropts *o, const struct st_buf *text)
{
    struct st_buf then, path, out, table;
    char err[1024] = "";
    int drifted = 0, code = ST_EXIT_USAGE;
    st_buf_init(&then);
    st_buf_init(&path);
    st_buf_init(&out);
    st_buf_init(&table);
    if (read_summary(o->with, &then, &path) != 0) {
        goto out;
    }
    if (st_report_compare(st_buf_str(text), text->len, st_buf_str(&then), then.len, o->with,
                          plan_noise(text), &out, &drifted, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        goto out;
    }
    if (st_report_drift_md(st_buf_str(&out), out.len, &table, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        goto out;
    }
    fwrite(table.data, 1, table.len, stdout);
    st_buf_putc(&out, '\n');
    st_buf_clear(&path);
    st_buf_printf(&path, "%s/compare.json", o->dir);
    int rc = st_fs_write_atomic(st_buf_str(&path), out.data, out.len, 0644);
    if (rc != 0) {
        fprintf(stderr, CMD ": %s: %s\n", st_buf_str(&path), st_strerror(rc));
        code = ST_EXIT_IO;
        goto out;
    }
    printf("wrote %s\n", st_buf_str(&path));
    code = drifted ? ST_EXIT_FAIL : ST_EXIT_OK;
out:
    st_buf_release(&then);
    st_buf_release(&path);
    st_buf_release(&out);
    st_buf_release(&table);
    return code;
}

int st_cli_report(int argc, char **argv)
{
    struct ropts o = {0};
    char **rest = st_xcalloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0, code = ST_EXIT_USAGE;
    struct st_buf text, path, dir;
    char err[1024] = "";
    st_buf_init(&text);
    st_buf_init(&path);
    st_buf_init(&dir);
    int nops = split_operands(argc, argv, rest, &nrest, &o.dir);
    const struct st_opt opts[] = {
        {ST_OPT_FLAG("--html", &o.html, 1)},
        {ST_OPT_STR("--compare-with", &o.with)},
        {.flag = NULL},
    };
    const struct st_opt *const tables[] = {opts, NULL};
    struct st_cli_cmd cmd = {.name = "report", .usage = usage, .tables = tables};
    code = st_cli_parse(&cmd, nrest, rest);
    if (code >= 0) {
        goto out;
    }
    code = ST_EXIT_USAGE;
    if (nops != 1) {
        fprintf(stderr, CMD ": expected one campaign directory, got %d (see --help)\n", nops);
        goto out;
    }
    /* "DIR/" and "DIR" name the same archive; the messages say DIR/report.md either way. */
    st_buf_puts(&dir, o.dir);
    while (dir.len > 1 && dir.data[dir.len - 1] == '/') {
        dir.data[--dir.len] = '\0';
    }
    o.dir = st_buf_str(&dir);
    if (read_summary(o.dir, &text, &path) != 0) {
        goto out;
    }
    int rc = st_report_write(o.dir, o.html, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        /* The summary was readable a moment ago: a negated errno now is about writing. */
        code = rc == ST_EPARSE || rc == ST_ETOOBIG ? ST_EXIT_USAGE : ST_EXIT_IO;
        goto out;
    }
    printf("wrote %s/report.md\n", o.dir);
    if (o.html) {
        printf("wrote %s/report.html\n", o.dir);
    }
    code = o.with != NULL ? compare(&o, &text) : ST_EXIT_OK;
out:
    if (fflush(stdout) != 0 && code == ST_EXIT_OK) {
        code = ST_EXIT_IO;
    }
    st_buf_release(&text);
    st_buf_release(&path);
    st_buf_release(&dir);
    free(rest);
    return code;
}
