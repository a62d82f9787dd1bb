/* The imperative hot path of pyprof.attribution.capture's Recorder, in C (pyprof.native.shim).

   rec_invoke and rec_free take the place of MXImperativeInvokeEx and MXNDArrayFree in mxnet's
   _LIB (ctypes calls them with the GIL released: nothing here touches Python). Per recorded call
   the log gets the record capture._record makes, as int64 words (strings apart); a handle ->
   (shape, dtype, producer seq, output slot) cache, evicted at the free (addresses are reused),
   gives inputs their producers. Python's hooks share the cache and the seq counter through the
   rec_get/rec_put/rec_pop/rec_reserve calls. No link against libmxnet: its functions come as
   addresses (rec_set). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*invoke_fn)(void *, int, void **, int *, void ***, int, const char **, const char **,
                         const int **);
typedef int (*free_fn)(void *);
typedef int (*shape_fn)(void *, int *, const int64_t **); /* MXNDArrayGetShapeEx64 */
typedef int (*dtype_fn)(void *, int *);

static invoke_fn real_invoke;
static free_fn real_free;
static shape_fn get_shape;
static dtype_fn get_dtype;

int rec_active; /* read and written by Python (c_int.in_dll): a window records */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t next_seq, used, max_calls, unrecorded, full;

/* ---- the handle cache: open addressing, linear probing, backward-shift deletion ---- */
#define INLINE 6
typedef struct {
    uintptr_t key; /* 0: empty */
    int64_t seq;
    int32_t slot, dtype, ndim; /* ndim -1: shape unknown (None) */
    int64_t dims[INLINE];
    int64_t *big; /* ndim > INLINE */
} entry;

static entry *tab;
static size_t cap, count;

static size_t slot_of(uintptr_t k) { return (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1); }
static const int64_t *dims_of(const entry *e) { return e->ndim > INLINE ? e->big : e->dims; }

static entry *find(uintptr_t k) {
    if (!cap) return NULL;
    for (size_t i = slot_of(k);; i = (i + 1) & (cap - 1)) {
        if (tab[i].key == k) return &tab[i];
        if (!tab[i].key) return NULL;
    }
}

static int grow(void) {
    size_t old = cap, ncap = cap ? cap * 2 : 1024;
    entry *otab = tab, *nt = calloc(ncap, sizeof(entry));
    if (!nt) return -1;
    tab = nt;
    cap = ncap;
    for (size_t j = 0; j < old; j++)
        if (otab[j].key) {
            size_t i = slot_of(otab[j].key);
            while (tab[i].key) i = (i + 1) & (cap - 1);
            tab[i] = otab[j];
        }
    free(otab);
    return 0;
}

/* Store (seq, slot, dtype, ndim, dims) for k; -1 when out of memory. */
static int put(uintptr_t k, int64_t seq, int32_t sl, int32_t dt, int32_t nd, const int64_t *d) {
    entry *e = find(k);
    if (!e) {
        if ((count + 1) * 2 > cap && grow()) return -1;
        size_t i = slot_of(k);
        while (tab[i].key) i = (i + 1) & (cap - 1);
        e = &tab[i];
        memset(e, 0, sizeof *e);
        e->key = k;
        count++;
    }
    int64_t *big = NULL;
    if (nd > INLINE && !(big = malloc(sizeof(int64_t) * (size_t)nd))) return -1;
    memcpy(nd > INLINE ? big : e->dims, d, sizeof(int64_t) * (size_t)(nd > 0 ? nd : 0));
    if (e->ndim > INLINE) free(e->big);
    e->big = big;
    e->seq = seq, e->slot = sl, e->dtype = dt, e->ndim = nd;
    return 0;
}

static void pop(uintptr_t k) {
    entry *e = find(k);
    if (!e) return;
    if (e->ndim > INLINE) free(e->big);
    size_t i = (size_t)(e - tab), j = i;
    for (;;) { /* shift back the entries of the run after i that may sit at i */
        j = (j + 1) & (cap - 1);
        if (!tab[j].key) break;
        size_t h = slot_of(tab[j].key);
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            tab[i] = tab[j];
            i = j;
        }
    }
    tab[i].key = 0;
    count--;
}

static void clear_cache(void) {
    for (size_t i = 0; i < cap; i++)
        if (tab[i].key && tab[i].ndim > INLINE) free(tab[i].big);
    free(tab);
    tab = NULL, cap = count = 0;
}

/* ---- gradient links: the engine variable (an NDArray's Chunk*) -> its last writer ----
   autograd's backward writes each variable's gradient array, whose handle no call shows
   (Gluon's grad arrays were made before; mxnet's .grad a new handle each time): Python names
   the gradients' chunks and their writing nodes (rec_link); a handle of such a chunk, cached
   now or first seen later, gets that node as producer. Read by the checked layout only. */
typedef struct {
    uintptr_t chunk;
    int64_t seq;
    int32_t slot;
} link;
static link *links;
static size_t nlinks;
static int64_t layout[5]; /* (defined with the shapes' reading, below) */

static uintptr_t chunk_of(const char *h) {
    void *c;
    memcpy(&c, h + layout[0], sizeof c); /* L_CHUNK */
    return (uintptr_t)c;
}

static const link *linked(uintptr_t c) {
    for (size_t i = 0; c && i < nlinks; i++)
        if (links[i].chunk == c) return &links[i];
    return NULL;
}

/* ---- the log: int64 words, and the keys' and vals' bytes apart ---- */
typedef struct {
    char *p;
    size_t n, cap;
} buf;
static buf words, strs;

static int reserve_buf(buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 1 << 16;
    while (c < b->n + more) c *= 2;
    char *p = realloc(b->p, c);
    if (!p) return -1;
    b->p = p, b->cap = c;
    return 0;
}

static int w(int64_t v) {
    if (reserve_buf(&words, 8)) return -1;
    memcpy(words.p + words.n, &v, 8);
    words.n += 8;
    return 0;
}

static int str(const char *s, int64_t *len) { /* the bytes to strs; len -1: NULL */
    size_t n = s ? strlen(s) : 0;
    if (reserve_buf(&strs, n)) return -1;
    memcpy(strs.p + strs.n, s, n);
    strs.n += n;
    *len = s ? (int64_t)n : -1;
    return 0;
}

/* ---- shapes and dtypes ----
   MXNDArrayGetShapeEx64 and GetDType are API calls, which profile_api traces: about 1.4 us and a
   trace event each. So an NDArray is read in place, by MXNet 1.9.1's layout (ndarray.h, tuple.h):
   ptr_ (shared_ptr<Chunk>: NULL for none), shape_ (TShape: int ndim_, int num_heap_allocated_,
   int64 data_stack_[4], int64 *data_heap_ past 4 dims), byte_offset_, int dtype_. The offsets
   come from shim.LAYOUT once shim.check_layout has read arrays of known shape and dtype through
   them (rec_layout); until then, after a failed check, and for what a read refuses (none, an
   unknown shape or dim), MXNet is asked. */
enum { L_CHUNK, L_NDIM, L_STACK, L_HEAP, L_DTYPE, L_N }; /* shim._offsets writes this order */
#define STACK_DIMS 4
static int64_t layout[L_N];
static int direct; /* layout holds checked offsets */

/* h's shape and dtype by layout L; -1 when it does not read them (dims point into h). The
   heap pointer is followed only when trusted: a wrong layout's ndim must not be a pointer's. */
static int peek(const char *h, const int64_t *L, int trusted, int32_t *nd, const int64_t **d, int32_t *dt) {
    void *chunk;
    int32_t n, t;
    const int64_t *dims = (const int64_t *)(h + L[L_STACK]);
    memcpy(&chunk, h + L[L_CHUNK], sizeof chunk);
    memcpy(&n, h + L[L_NDIM], sizeof n);
    memcpy(&t, h + L[L_DTYPE], sizeof t);
    if (!chunk || n < 0 || n > 64 || t < 0 || t > 32) return -1;
    if (n > STACK_DIMS) {
        if (!trusted) return -1;
        memcpy(&dims, h + L[L_HEAP], sizeof dims);
        if (!dims) return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (dims[i] < 0) return -1;
    *nd = n, *d = dims, *dt = t;
    return 0;
}

/* The shape and dtype of h; -1 when MXNet refuses them. */
static int query(void *h, int32_t *nd, const int64_t **d, int32_t *dt) {
    int n, t;
    const int64_t *pd;
    if (direct && !peek(h, layout, 1, nd, d, dt)) return 0;
    if (get_shape(h, &n, &pd) || get_dtype(h, &t)) return -1;
    *nd = n < 0 ? -1 : n, *d = pd, *dt = t; /* (pd: MXNet's thread-local buffer, read at once) */
    return 0;
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1000;
}

static int meta_words(int32_t dt, int32_t nd, const int64_t *d) {
    if (w(dt) || w(nd)) return -1;
    for (int32_t i = 0; i < nd; i++)
        if (w(d[i])) return -1;
    return 0;
}

/* Record one call (capture._record's steps in its order); seq spent even when it fails. A
   record: seq, t, pushed, thread, nin, nout, nsig, nstr; the input handles, their producers, their
   slots, the output handles; then nsig words that many calls share (the signature: op, nkv, per
   input and output dtype, ndim, dims..., per attribute the key's and val's lengths), and the
   attributes' nstr bytes in strs. shim.parse reads each signature once. */
static void record(int64_t t, int64_t pushed, void *op, int nin, void **ins, int nout, void **outs,
                   int np, const char **keys, const char **vals, int given) {
    pthread_mutex_lock(&mu);
    if (used >= max_calls) { /* bounded, whatever the window */
        full = 1, rec_active = 0;
        pthread_mutex_unlock(&mu);
        return;
    }
    int64_t seq = next_seq++;
    size_t w0 = words.n, s0 = strs.n, fixed = 8 + 3 * (size_t)nin + (size_t)nout;
    int32_t nd, dt;
    const int64_t *d;
    int64_t *r, len;
    if (reserve_buf(&words, 8 * fixed)) goto fail;
    words.n += 8 * fixed;
#define R ((int64_t *)(words.p + w0)) /* (words.p moves as the log grows) */
    r = R;
    r[0] = seq, r[1] = t, r[2] = pushed, r[3] = (int64_t)pthread_self(), r[4] = nin, r[5] = nout | ((int64_t)given << 32);
    for (int i = 0; i < nin; i++) {
        uintptr_t h = (uintptr_t)ins[i];
        entry *e = find(h);
        int64_t p = e ? e->seq : -1;
        int32_t k = e ? e->slot : -1;
        if (!e && direct && nlinks) { /* first seen: a gradient autograd wrote? */
            const link *l = linked(chunk_of(ins[i]));
            if (l) p = l->seq, k = l->slot;
        }
        if (!e || e->dtype == -1) { /* never seen, or an executor's output (no shape yet) */
            if (query(ins[i], &nd, &d, &dt) || put(h, p, k, dt, nd, d)) goto fail;
        }
        r = R;
        r[8 + i] = (int64_t)h, r[8 + nin + i] = p, r[8 + 2 * nin + i] = k;
    }
    if (w((int64_t)(uintptr_t)op) || w(np)) goto fail;
    for (int i = 0; i < nin; i++) {
        entry *e = find((uintptr_t)ins[i]);
        if (meta_words(e->dtype, e->ndim, dims_of(e))) goto fail;
    }
    for (int j = 0; j < nout; j++) {
        if (query(outs[j], &nd, &d, &dt) || put((uintptr_t)outs[j], seq, j, dt, nd, d) ||
            meta_words(dt, nd, d))
            goto fail;
        R[8 + 3 * nin + j] = (int64_t)(uintptr_t)outs[j];
    }
    for (int i = 0; i < np; i++)
        if (str(keys[i], &len) || w(len) || str(vals[i], &len) || w(len)) goto fail;
    r = R;
    r[6] = (int64_t)((words.n - w0) / 8 - fixed), r[7] = (int64_t)(strs.n - s0);
#undef R
    used++;
    pthread_mutex_unlock(&mu);
    return;
fail:
    words.n = w0, strs.n = s0, unrecorded++;
    pthread_mutex_unlock(&mu);
}

int rec_invoke(void *op, int nin, void **ins, int *nout, void ***outs, int np, const char **keys,
               const char **vals, const int **stypes) {
    int64_t t = now_us();
    int given = *outs != NULL; /* out=: the caller's arrays, allocated before */
    int rc = real_invoke(op, nin, ins, nout, outs, np, keys, vals, stypes);
    if (rc == 0 && rec_active)
        record(t, now_us(), op, nin, ins, *nout, *outs, np, keys, vals, given);
    return rc;
}

int rec_free(void *h) {
    pthread_mutex_lock(&mu); /* before the free: the address may be reused at once */
    pop((uintptr_t)h);
    pthread_mutex_unlock(&mu);
    return real_free(h);
}

/* ---- Python's side ---- */
void rec_set(void *invoke, void *fr, void *shape, void *dtype) {
    if (invoke) real_invoke = (invoke_fn)invoke;
    if (fr) real_free = (free_fn)fr;
    if (shape) get_shape = (shape_fn)shape;
    if (dtype) get_dtype = (dtype_fn)dtype;
}

/* h read by layout L (L_N offsets) into out: dtype, ndim, dims (at most n - 2); ndim, or -1 when
   it does not read h. For shim.check_layout. */
int rec_peek(void *h, const int64_t *L, int trusted, int64_t *out, int n) {
    int32_t nd, dt;
    const int64_t *d;
    if (peek(h, L, trusted, &nd, &d, &dt)) return -1;
    out[0] = dt, out[1] = nd;
    for (int32_t i = 0; i < nd && i + 2 < n; i++) out[2 + i] = d[i];
    return nd;
}

/* h read in place by the checked layout, as rec_peek; -1 also when there is none (rec_layout). */
int rec_read(void *h, int64_t *out, int n) {
    pthread_mutex_lock(&mu);
    int nd = direct ? rec_peek(h, layout, 1, out, n) : -1;
    pthread_mutex_unlock(&mu);
    return nd;
}

/* Read NDArrays in place by layout L from now on; NULL: ask MXNet. Returns whether it reads in
   place (L NULL and n 0: only asks). */
int rec_layout(const int64_t *L, int set) {
    pthread_mutex_lock(&mu);
    if (set) {
        if (L) memcpy(layout, L, sizeof layout);
        direct = L != NULL;
    }
    int d = direct;
    pthread_mutex_unlock(&mu);
    return d;
}

void rec_configure(int64_t max, int64_t seq) {
    pthread_mutex_lock(&mu);
    max_calls = max;
    if (seq >= 0) next_seq = seq;
    pthread_mutex_unlock(&mu);
}

/* n seqs for Python's hooks: the first, or -1 when the window is full (recording stops). */
int64_t rec_reserve(int64_t n) {
    int64_t first = -1;
    pthread_mutex_lock(&mu);
    if (used + n > max_calls) {
        full = 1, rec_active = 0;
    } else {
        first = next_seq, next_seq += n, used += n;
    }
    pthread_mutex_unlock(&mu);
    return first;
}

void rec_release(int64_t n) { /* calls reserved and not recorded (their seqs stay spent) */
    pthread_mutex_lock(&mu);
    used -= n;
    pthread_mutex_unlock(&mu);
}

int64_t rec_seq(void) {
    pthread_mutex_lock(&mu);
    int64_t s = next_seq;
    pthread_mutex_unlock(&mu);
    return s;
}

/* h's entry into out (seq, slot, dtype, ndim, dims...; at most n words): 1 found, 0 not. */
int rec_get(void *h, int64_t *out, int n) {
    pthread_mutex_lock(&mu);
    entry *e = find((uintptr_t)h);
    if (e) {
        out[0] = e->seq, out[1] = e->slot, out[2] = e->dtype, out[3] = e->ndim;
        for (int i = 0; i < e->ndim && i + 4 < n; i++) out[4 + i] = dims_of(e)[i];
    }
    pthread_mutex_unlock(&mu);
    return e != NULL;
}

int rec_put(void *h, int64_t seq, int slot, int dtype, int ndim, const int64_t *dims) {
    pthread_mutex_lock(&mu);
    int rc = put((uintptr_t)h, seq, slot, dtype, ndim, dims);
    pthread_mutex_unlock(&mu);
    return rc;
}

void rec_pop(void *h) {
    pthread_mutex_lock(&mu);
    pop((uintptr_t)h);
    pthread_mutex_unlock(&mu);
}

/* Gradients written by a backward: n chunks and their writers (seq, slot). Each cached handle
   of one of them gets the writer as producer now, a handle first seen later when it is read;
   the table keeps the latest writer of each chunk. Returns how many cached handles were
   linked, or -1 when NDArrays are not read in place (no chunk is known) or out of memory. */
int64_t rec_link(int64_t n, const int64_t *chunks, const int64_t *seqs, const int32_t *slots) {
    int64_t got = 0;
    pthread_mutex_lock(&mu);
    if (!direct) {
        pthread_mutex_unlock(&mu);
        return -1;
    }
    for (int64_t j = 0; j < n; j++) {
        link *l = (link *)linked((uintptr_t)chunks[j]);
        if (!l) {
            link *m = realloc(links, sizeof(link) * (nlinks + 1));
            if (!m) {
                pthread_mutex_unlock(&mu);
                return -1;
            }
            links = m, l = &links[nlinks++], l->chunk = (uintptr_t)chunks[j];
        }
        l->seq = seqs[j], l->slot = slots[j];
    }
    for (size_t i = 0; i < cap; i++) {
        if (!tab[i].key) continue;
        const link *l = linked(chunk_of((const char *)tab[i].key));
        if (l) tab[i].seq = l->seq, tab[i].slot = l->slot, got++;
    }
    pthread_mutex_unlock(&mu);
    return got;
}

/* The chunk of NDArray h by the checked layout; 0 when NDArrays are not read in place. */
int64_t rec_chunk(void *h) {
    pthread_mutex_lock(&mu);
    int64_t c = direct ? (int64_t)chunk_of(h) : 0;
    pthread_mutex_unlock(&mu);
    return c;
}

void rec_clear(void) {
    pthread_mutex_lock(&mu);
    free(links);
    links = NULL, nlinks = 0;
    clear_cache();
    pthread_mutex_unlock(&mu);
}

/* Hand the log over (the caller frees both with rec_free_log) and start an empty one; out:
   words bytes, strs bytes, full, unrecorded. With reset (a window taken): full and the window's
   count start again. */
void rec_drain(char **wp, char **sp, int64_t *out, int reset) {
    pthread_mutex_lock(&mu);
    *wp = words.p, *sp = strs.p;
    out[0] = (int64_t)words.n, out[1] = (int64_t)strs.n, out[2] = full, out[3] = unrecorded;
    memset(&words, 0, sizeof words);
    memset(&strs, 0, sizeof strs);
    if (reset) full = 0, used = 0;
    pthread_mutex_unlock(&mu);
}

void rec_free_log(char *wp, char *sp) {
    free(wp);
    free(sp);
}

/* A forked child: a parent thread may have held the mutex; the child records nothing. */
static void after_fork_in_child(void) {
    pthread_mutex_init(&mu, NULL);
    rec_active = 0, used = 0, full = 0;
    words.n = strs.n = 0;
}

__attribute__((constructor)) static void on_load(void) {
    pthread_atfork(NULL, NULL, after_fork_in_child);
}
