/*
 * The campaign journal: an append-only file of checksummed lines, one record per line, each
 * written with one write(2) and fsynced before st_journal_append() returns. Line format (see
 * docs/internals/journal.md):
 *
 *     <crc32c: 8 lowercase hex> SP <seq: decimal> SP <kind: [a-z0-9_]{1,32}> SP <json> LF
 *
 * The CRC covers every byte after the first space up to (not including) the LF. Record 0 is the
 * header (kind "journal"); seq is the line index. Opening validates every line: a torn or corrupt
 * tail (no valid record after it, at most ST_JOURNAL_MAX_LINE_BYTES) is truncated away; a bad
 * line followed by a valid one is ST_EPROTO naming the line. Units group records: those appended
 * between unit_begin and unit_end belong to the unit; a unit that began but did not end is
 * partial and the resume appends unit_discard, which voids its records without rewriting them.
 * One process, one thread per journal (flock(2) keeps a second process out; a child forked
 * while it is open shares the lock, so only one of them may append).
 */
#ifndef ST_STORE_JOURNAL_H
#define ST_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* A record's JSON is at most this long; a line at most ST_JOURNAL_MAX_LINE_BYTES. */
#define ST_JOURNAL_MAX_JSON_BYTES (4u << 20)
#define ST_JOURNAL_MAX_LINE_BYTES (ST_JOURNAL_MAX_JSON_BYTES + 64u)
/* A journal file over this size is refused (ST_ETOOBIG): opening reads it whole. */
#define ST_JOURNAL_MAX_FILE_BYTES ((size_t)1 << 30)
#define ST_JOURNAL_MAX_KIND_BYTES 32u
#define ST_JOURNAL_MAX_UNIT_BYTES 128u

/* What became of the unit instance a record belongs to. */
enum st_journal_rec_state {
    ST_JOURNAL_LIVE = 0, /* outside any unit, or in a unit that ended */
    ST_JOURNAL_VOID,     /* in a unit instance that a unit_discard record voided */
    ST_JOURNAL_PARTIAL,  /* in the unit that began and has not ended nor been discarded */
};

enum st_journal_unit_state {
    ST_JOURNAL_UNIT_NONE = 0, /* never began, or only discarded instances */
    ST_JOURNAL_UNIT_DONE,     /* an instance ended (its unit_end record holds the result) */
    ST_JOURNAL_UNIT_OPEN,     /* began and has neither ended nor been discarded */
};

/* One record, as seen by the scanner and the iterator. Every pointer borrows the scanned bytes
 * and is valid only during the callback. */
struct st_journal_rec {
    uint64_t seq;
    uint64_t line; /* 1-based line number in the file (seq + 1) */
    const char *kind;
    size_t kind_len;
    const char *json;
    size_t json_len;
    /* Iterator only (NULL / LIVE from the scanner): the unit the record is in, including the
     * unit's own begin/end/discard records. */
    const char *unit;
    enum st_journal_rec_state state;
};

/* Return 0 to continue; any other value stops the scan or iteration and is returned. */
typedef int (*st_journal_rec_cb)(void *ctx, const struct st_journal_rec *rec);

struct st_journal_done {
    char *id;         /* owned */
    uint64_t end_seq; /* seq of its unit_end record */
};

/* Unit bookkeeping, rebuilt from the records. Caller-embedded; pure. */
struct st_journal_units {
    struct st_journal_done *done; /* owned, in end order */
    size_t n_done, cap_done;
    uint64_t *voided; /* owned: begin seqs of discarded instances, increasing */
    size_t n_voided, cap_voided;
    char *open_id; /* owned; NULL when no unit is open */
    uint64_t open_begin_seq;
};

void st_journal_units_init(struct st_journal_units *u);
void st_journal_units_release(struct st_journal_units *u);
/*
 * Applies one valid record to u (unit_begin/unit_end/unit_discard change it; other kinds do not).
 * Returns 0, or ST_EPROTO when the record breaks the unit rules (begin while another unit is
 * open or of a unit already done, end or discard of a unit that is not the open one, a unit
 * record whose JSON has no valid "unit" string).
 */
int st_journal_units_apply(struct st_journal_units *u, const struct st_journal_rec *rec) ST_WUR;

struct st_journal_scan {
    uint64_t records;  /* valid records, which is the next seq */
    size_t good_len;   /* bytes of the valid prefix (whole lines) */
    size_t tail_len;   /* bytes after it to drop: a torn or corrupt tail */
    uint64_t bad_line; /* 1-based line of the dropped tail or of the error; 0 when none */
};

/*
 * Pure: validates data[0..len), a journal's bytes, calling cb (may be NULL) for every valid record
 * in order and, when u is not NULL, applying each to u. The rules: line k (from 0) has seq k,
 * a good CRC, a kind, and JSON that parses; line 0 is the header. The first bad line starts the
 * tail, which is dropped (tail_len) when no later line is a CRC-valid record and it is at most
 * ST_JOURNAL_MAX_LINE_BYTES; with no valid record at all it must be a prefix of the header line.
 * Returns 0; ST_EPROTO for a bad line followed by a valid one, a CRC-valid line with the wrong
 * seq or bad JSON, a broken unit rule, a tail too long, or bytes that are not a journal; or cb's
 * non-zero value. err (may be NULL) receives a message naming the line.
 */
int st_journal_scan(const char *data, size_t len, struct st_journal_units *u, st_journal_rec_cb cb,
                    void *ctx, struct st_journal_scan *out, char *err, size_t errlen) ST_WUR;

/* Test hook: the write(2) the journal uses, to inject short writes and errors. */
typedef long (*st_journal_write_fn)(int fd, const void *buf, size_t len);

struct st_journal {
    int fd;    /* owned; -1 when closed */
    int error; /* first append failure (negated errno), sticky */
    uint64_t next_seq;
    size_t len;            /* bytes of valid records in the file */
    size_t dropped_bytes;  /* torn tail truncated by open; 0 when none */
    uint64_t dropped_line; /* its 1-based line */
    char *path;            /* owned */
    struct st_journal_units units;
    st_journal_write_fn write_fn; /* NULL means write(2) */
};

/*
 * Opens path (O_RDWR|O_APPEND|O_CLOEXEC, created 0644 when missing), takes an exclusive flock,
 * validates it with st_journal_scan, truncates a torn tail (and fsyncs), writes the header to a
 * new or empty journal (fsyncing the file and its directory) and positions for appending.
 * Returns 0; -EBUSY when another process holds it; ST_ETOOBIG over ST_JOURNAL_MAX_FILE_BYTES;
 * ST_EPROTO for a corrupt journal (err names the line); or a negated errno. On error j is closed.
 */
int st_journal_open(struct st_journal *j, const char *path, char *err, size_t errlen) ST_WUR;

/*
 * Appends one record of the given kind ([a-z0-9_]{1,32}, not a reserved one: journal, unit_*)
 * with json[0..len) (one JSON value, no LF byte, at most ST_JOURNAL_MAX_JSON_BYTES), assigning
 * the next seq, and fsyncs it. Returns 0; -EINVAL for a bad or reserved kind; ST_EPARSE for bad
 * JSON or an LF in it; ST_ETOOBIG; or the sticky negated errno of a failed write or fsync
 * (-ENOSPC, -EFBIG, -EIO), after which the file is truncated back to its last valid record and
 * every later append or unit call returns the same code (checked before anything else).
 */
int st_journal_append(struct st_journal *j, const char *kind, const char *json, size_t len) ST_WUR;

/*
 * Unit records. unit ids are 1..ST_JOURNAL_MAX_UNIT_BYTES printable ASCII bytes other than '"'
 * and '\\'. begin: -EINVAL for a bad id, -EBUSY while another unit is open (discard it first),
 * -EEXIST for a unit already done. end: result_json is one JSON value (as for append), stored as
 * "result"; -EINVAL unless unit is the open one. discard: voids the open unit's records; -EINVAL
 * unless unit is the open one. Each also returns append's errors.
 */
int st_journal_unit_begin(struct st_journal *j, const char *unit) ST_WUR;
int st_journal_unit_end(struct st_journal *j, const char *unit, const char *result_json,
                        size_t len) ST_WUR;
int st_journal_unit_discard(struct st_journal *j, const char *unit) ST_WUR;

enum st_journal_unit_state st_journal_unit_state(const struct st_journal *j, const char *unit);
/* The open (partial) unit's id, borrowed until the next append; NULL when none. */
const char *st_journal_open_unit(const struct st_journal *j);
/* Completed units, in completion order; the id is borrowed from j. */
size_t st_journal_units_done(const struct st_journal *j);
const char *st_journal_unit_done_id(const struct st_journal *j, size_t i);

/*
 * Replays every record from seq 0 in order, re-reading the file, with unit and state filled in
 * (records of voided instances come with ST_JOURNAL_VOID: a resume skips them). Returns 0, cb's
 * non-zero value, or a negated errno / ST_EPROTO if the file changed under us.
 */
int st_journal_iter(struct st_journal *j, st_journal_rec_cb cb, void *ctx) ST_WUR;

/* Closes (releasing the lock) and frees. Returns the sticky error or close's. Safe to call twice.
 */
int st_journal_close(struct st_journal *j) ST_WUR;

#endif
