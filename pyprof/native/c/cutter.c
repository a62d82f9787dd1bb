/* The window cut's byte work (pyprof.trace.rawcut, step 1): a run of whole events in MXNet's
 * layout (trace.json mxnet_layout: objects separated by commas, one key per line) read as
 * columns, then written compact, its ids replaced. Python keeps every rule and all state (the
 * numbering of ids, the slices' nesting); this file only reads and writes bytes, and refuses
 * (returns -1) any run it would read differently from orjson over the same bytes: a back slash,
 * a line with more than 4 quotes (a raw value holding one), a control byte or one past ASCII, a
 * number that is not a plain integer of at most 64 bits, a string or negative id, bind_id or
 * id2. Python then reads that run the way it always did.
 *
 * What it writes for a run it takes is byte for byte what orjson.dumps writes for the events as
 * orjson.loads read them (keys in their order, no white space), joined by ",".
 */
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p, *end;
    int quotes; /* quotes on the current line */
} Cur;

static int ws(Cur *c) { /* skips white space; -1 at a line of more than 4 quotes */
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch == '\n') {
            c->quotes = 0;
        } else if (ch != ' ' && ch != '\t' && ch != '\r') {
            return 0;
        }
        c->p++;
    }
    return 0;
}

/* A string at c->p (at its quote): its bytes [*s, *s + *n) without quotes. */
static int string(Cur *c, const unsigned char **s, int64_t *n) {
    if (c->p >= c->end || *c->p != '"') return -1;
    const unsigned char *q = ++c->p;
    while (q < c->end && *q != '"') {
        if (*q == '\\' || *q < 0x20 || *q >= 0x80) return -1;
        q++;
    }
    if (q >= c->end) return -1;
    *s = c->p;
    *n = q - c->p;
    c->p = q + 1;
    c->quotes += 2;
    return c->quotes > 4 ? -1 : 0;
}

/* A plain integer: -?(0|[1-9][0-9]*), magnitude at most 2**64 - 1; *neg set for a minus. */
static int integer(Cur *c, uint64_t *v, int *neg) {
    const unsigned char *q = c->p;
    *neg = 0;
    if (q < c->end && *q == '-') { *neg = 1; q++; }
    if (q >= c->end || *q < '0' || *q > '9') return -1;
    if (*q == '0' && q + 1 < c->end && q[1] >= '0' && q[1] <= '9') return -1;
    uint64_t x = 0;
    const unsigned char *d = q;
    while (q < c->end && *q >= '0' && *q <= '9') {
        uint64_t digit = (uint64_t)(*q - '0');
        if (x > (UINT64_MAX - digit) / 10) return -1;
        x = x * 10 + digit;
        q++;
    }
    if (q - d > 20) return -1;
    if (q < c->end && (*q == '.' || *q == 'e' || *q == 'E')) return -1;
    if (*neg && x > (uint64_t)INT64_MAX + 1) return -1; /* orjson: -2**63 at least */
    if (*neg && x == 0) return -1; /* -0: orjson writes 0 */
    *v = x;
    c->p = q;
    return 0;
}


/* Each reader below checks a value at c->p and copies it, white space left out, to *o. */
static int value(Cur *c, unsigned char **o, int depth);

static int copy_string(Cur *c, unsigned char **o, const unsigned char **s, int64_t *n) {
    const unsigned char *start = c->p;
    if (string(c, s, n) < 0) return -1;
    memcpy(*o, start, (size_t)(c->p - start));
    *o += c->p - start;
    return 0;
}

static int copy_integer(Cur *c, unsigned char **o, uint64_t *v, int *neg) {
    const unsigned char *start = c->p;
    if (integer(c, v, neg) < 0) return -1;
    memcpy(*o, start, (size_t)(c->p - start));
    *o += c->p - start;
    return 0;
}

/* An object's keys so far: a repeated one (orjson keeps its last value) is refused. */
typedef struct {
    const unsigned char *s[32];
    int64_t n[32];
    int count;
} Keys;

static int new_key(Keys *k, const unsigned char *s, int64_t n) {
    for (int i = 0; i < k->count; i++) {
        if (k->n[i] == n && memcmp(k->s[i], s, (size_t)n) == 0) return -1;
    }
    if (k->count == 32) return -1;
    k->s[k->count] = s;
    k->n[k->count++] = n;
    return 0;
}

static int container(Cur *c, unsigned char **o, int depth) { /* an object or array in an event */
    unsigned char close = *c->p == '{' ? '}' : ']';
    int object = close == '}';
    *(*o)++ = *c->p++;
    if (depth > 64 || ws(c) < 0) return -1;
    if (c->p < c->end && *c->p == close) { c->p++; *(*o)++ = close; return 0; }
    Keys keys;
    keys.count = 0;
    for (;;) {
        if (object) {
            const unsigned char *s; int64_t n;
            if (copy_string(c, o, &s, &n) < 0 || new_key(&keys, s, n) < 0 || ws(c) < 0
                || c->p >= c->end || *c->p++ != ':') return -1;
            *(*o)++ = ':';
            if (ws(c) < 0) return -1;
        }
        if (value(c, o, depth + 1) < 0 || ws(c) < 0 || c->p >= c->end) return -1;
        if (*c->p == ',') { c->p++; *(*o)++ = ','; if (ws(c) < 0) return -1; continue; }
        if (*c->p == close) { c->p++; *(*o)++ = close; return 0; }
        return -1;
    }
}

static int value(Cur *c, unsigned char **o, int depth) {
    if (c->p >= c->end) return -1;
    unsigned char ch = *c->p;
    if (ch == '"') { const unsigned char *s; int64_t n; return copy_string(c, o, &s, &n); }
    if (ch == '{' || ch == '[') return container(c, o, depth);
    if (ch == '-' || (ch >= '0' && ch <= '9')) { uint64_t v; int neg; return copy_integer(c, o, &v, &neg); }
    static const char lits[3][6] = {"true", "false", "null"};
    static const size_t lens[3] = {4, 5, 4};
    for (int i = 0; i < 3; i++) {
        if ((size_t)(c->end - c->p) >= lens[i] && memcmp(c->p, lits[i], lens[i]) == 0) {
            memcpy(*o, c->p, lens[i]);
            *o += lens[i];
            c->p += lens[i];
            return 0;
        }
    }
    return -1;
}

#define KEY(s, n, k) ((n) == (int64_t)sizeof(k) - 1 && memcmp((s), (k), sizeof(k) - 1) == 0)

/* Reads a run and writes it compact to out (at least len + events + 16 bytes), events joined
 * by ",", as orjson.dumps writes the list of events orjson.loads reads. Columns, for each
 * event i: ph[i] (its one-letter phase, 0 when absent or not one letter), ts[i] with ts_ok[i]
 * (a plain integer), and per id kind k (0 pid, 1 tid, 2 id) ids[3i+k] with has[3i+k] (present)
 * and at[3i+k], the offset in out of its digits; same[i]: 1 when event i and the slice event
 * (B, E or X) before it in the run both have a string name and the names are equal; starts[i],
 * the offset in out of its '{'; [in_lo[i], in_hi[i]), its bytes in buf.
 * Returns the number of events and sets *size to the bytes written, or returns -1: the run is
 * not one this code reads as orjson does (Python reads it), or it holds more than cap events. */
int64_t cut_run(const unsigned char *buf, int64_t len, int64_t cap, unsigned char *out,
                int64_t *size, uint8_t *ph, int64_t *ts, uint8_t *ts_ok, uint64_t *ids,
                uint8_t *has, int64_t *at, uint8_t *same, int64_t *starts, int64_t *in_lo,
                int64_t *in_hi) {
    Cur c = {buf, buf + len, 0};
    unsigned char *o = out;
    int64_t n = 0;
    const unsigned char *prev_name = 0; int64_t prev_len = -1;
    if (ws(&c) < 0) return -1;
    while (c.p < c.end) {
        if (*c.p != '{' || n >= cap) return -1;
        if (n) *o++ = ',';
        starts[n] = o - out;
        in_lo[n] = c.p - buf;
        *o++ = '{';
        c.p++;
        ph[n] = 0; ts[n] = 0; ts_ok[n] = 0; same[n] = 0;
        for (int k = 0; k < 3; k++) { has[3 * n + k] = 0; ids[3 * n + k] = 0; at[3 * n + k] = 0; }
        const unsigned char *name = 0; int64_t name_len = -1;
        Keys keys;
        keys.count = 0;
        if (ws(&c) < 0) return -1;
        if (c.p < c.end && *c.p == '}') { c.p++; *o++ = '}'; goto next; }
        for (;;) {
            const unsigned char *k; int64_t kn;
            if (copy_string(&c, &o, &k, &kn) < 0 || new_key(&keys, k, kn) < 0 || ws(&c) < 0
                || c.p >= c.end || *c.p++ != ':') return -1;
            *o++ = ':';
            if (ws(&c) < 0 || c.p >= c.end) return -1;
            int kind = KEY(k, kn, "pid") ? 0 : KEY(k, kn, "tid") ? 1 : KEY(k, kn, "id") ? 2 : -1;
            unsigned bit = KEY(k, kn, "ph") ? 8u : KEY(k, kn, "ts") ? 16u : KEY(k, kn, "name") ? 32u : 0u;
            if (kind >= 0) {
                uint64_t v; int neg;
                at[3 * n + kind] = o - out;
                if (copy_integer(&c, &o, &v, &neg) < 0 || neg) return -1; /* a string or negative id */
                ids[3 * n + kind] = v;
                has[3 * n + kind] = 1;
            } else if (KEY(k, kn, "bind_id") || KEY(k, kn, "id2")) {
                return -1; /* several fields share a numbering: Python's way */
            } else if (bit == 8u && *c.p == '"') {
                const unsigned char *s; int64_t sn;
                if (copy_string(&c, &o, &s, &sn) < 0) return -1;
                ph[n] = sn == 1 ? s[0] : 0;
            } else if (bit == 16u && (*c.p == '-' || (*c.p >= '0' && *c.p <= '9'))) {
                uint64_t v; int neg;
                if (copy_integer(&c, &o, &v, &neg) < 0) return -1;
                if (!neg && v > (uint64_t)INT64_MAX) return -1;
                ts[n] = neg ? (int64_t)(0 - v) : (int64_t)v;
                ts_ok[n] = 1;
            } else if (bit == 32u && *c.p == '"') {
                if (copy_string(&c, &o, &name, &name_len) < 0) return -1;
            } else if (value(&c, &o, 1) < 0) {
                return -1;
            }
            if (ws(&c) < 0 || c.p >= c.end) return -1;
            if (*c.p == ',') { c.p++; *o++ = ','; if (ws(&c) < 0) return -1; continue; }
            if (*c.p == '}') { c.p++; *o++ = '}'; break; }
            return -1;
        }
        if (ph[n] == 'B' || ph[n] == 'E' || ph[n] == 'X') {
            same[n] = name && prev_name && name_len == prev_len
                      && memcmp(name, prev_name, (size_t)name_len) == 0;
            prev_name = name;
            prev_len = name ? name_len : -1;
        }
    next:
        in_hi[n] = c.p - buf;
        n++;
        if (ws(&c) < 0) return -1;
        if (c.p < c.end) {
            if (*c.p != ',') return -1;
            c.p++;
            if (ws(&c) < 0 || c.p >= c.end) return -1; /* not a comma at the end */
        }
    }
    *size = o - out;
    return n;
}

static unsigned char *put_int(unsigned char *o, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t x = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do { tmp[n++] = (char)('0' + x % 10); x /= 10; } while (x);
    if (v < 0) *o++ = '-';
    while (n) *o++ = (unsigned char)tmp[--n];
    return o;
}

static int digits(uint64_t v) {
    int n = 1;
    while (v >= 10) { v /= 10; n++; }
    return n;
}

/* Copies events [lo, hi) of the n cut_run wrote (size bytes at src, its columns ids, has, at
 * and starts) but those skip marks to dst (at least size bytes, plus 20 per id that grows and
 * sep_len per event), joined by sep, each id of kind k whose value old[k] (sorted, count[k] of them) holds written as
 * new[k] at the same place; where (unless NULL): for each event i in [lo, hi), the offset in
 * dst of its '{', -1 for one skipped. Returns the bytes written. */
static int64_t patch(const unsigned char *src, int64_t size, int64_t n, int64_t lo, int64_t hi,
                     const unsigned char *sep, int64_t sep_len, const uint64_t *ids,
                     const uint8_t *has, const int64_t *at, const int64_t *starts,
                     const uint8_t *skip, unsigned char *dst,
                     const uint64_t *old0, const int64_t *new0, int64_t count0,
                     const uint64_t *old1, const int64_t *new1, int64_t count1,
                     const uint64_t *old2, const int64_t *new2, int64_t count2, int64_t *where) {
    const uint64_t *olds[3] = {old0, old1, old2};
    const int64_t *news[3] = {new0, new1, new2};
    int64_t counts[3] = {count0, count1, count2};
    unsigned char *o = dst;
    int first = 1;
    for (int64_t i = lo; i < hi; i++) {
        if (skip[i]) { if (where) where[i - lo] = -1; continue; }
        int64_t from = starts[i], to = i + 1 < n ? starts[i + 1] - 1 : size; /* less "," */
        if (!first) { memcpy(o, sep, (size_t)sep_len); o += sep_len; }
        first = 0;
        if (where) where[i - lo] = o - dst;
        int64_t pos[3], repl[3];
        int m = 0;
        for (int k = 0; k < 3; k++) {
            if (!has[3 * i + k] || !counts[k]) continue;
            uint64_t v = ids[3 * i + k];
            int64_t lo = 0, hi = counts[k];
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (olds[k][mid] < v) lo = mid + 1; else hi = mid;
            }
            if (lo == counts[k] || olds[k][lo] != v) continue;
            int j = m++; /* sorted by place: the event's keys come in any order */
            while (j > 0 && pos[j - 1] > at[3 * i + k]) { pos[j] = pos[j - 1]; repl[j] = repl[j - 1]; j--; }
            pos[j] = at[3 * i + k];
            repl[j] = lo << 2 | k; /* the table's entry and the kind */
        }
        for (int j = 0; j < m; j++) {
            int k = (int)(repl[j] & 3);
            int64_t lo = repl[j] >> 2;
            memcpy(o, src + from, (size_t)(pos[j] - from));
            o += pos[j] - from;
            o = put_int(o, news[k][lo]);
            from = pos[j] + digits(olds[k][lo]);
        }
        memcpy(o, src + from, (size_t)(to - from));
        o += to - from;
    }
    return o - dst;
}

/* cut_patch as the JVM calls it: patch without the offsets. */
int64_t cut_patch(const unsigned char *src, int64_t size, int64_t n, int64_t lo, int64_t hi,
                  const unsigned char *sep, int64_t sep_len, const uint64_t *ids,
                  const uint8_t *has, const int64_t *at, const int64_t *starts,
                  const uint8_t *skip, unsigned char *dst,
                  const uint64_t *old0, const int64_t *new0, int64_t count0,
                  const uint64_t *old1, const int64_t *new1, int64_t count1,
                  const uint64_t *old2, const int64_t *new2, int64_t count2) {
    return patch(src, size, n, lo, hi, sep, sep_len, ids, has, at, starts, skip, dst,
                 old0, new0, count0, old1, new1, count1, old2, new2, count2, 0);
}

/* cut_patch, and where[i - lo] the offset in dst of event i's '{' (-1: skipped), for a window
 * held in memory (pyprof.trace.rawcut.Kept: the annotation reads and replaces its events). */
int64_t cut_patch_at(const unsigned char *src, int64_t size, int64_t n, int64_t lo, int64_t hi,
                     const unsigned char *sep, int64_t sep_len, const uint64_t *ids,
                     const uint8_t *has, const int64_t *at, const int64_t *starts,
                     const uint8_t *skip, unsigned char *dst,
                     const uint64_t *old0, const int64_t *new0, int64_t count0,
                     const uint64_t *old1, const int64_t *new1, int64_t count1,
                     const uint64_t *old2, const int64_t *new2, int64_t count2, int64_t *where) {
    return patch(src, size, n, lo, hi, sep, sep_len, ids, has, at, starts, skip, dst,
                 old0, new0, count0, old1, new1, count1, old2, new2, count2, where);
}
