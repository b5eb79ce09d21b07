/* Nesting of host records on their threads: depth and parent in one pass over records sorted by
 * (lane, ts, dur descending, id), fed in batches (see prof_engine/store/nesting.py).
 *
 * A record's depth is the number of records of its lane open when it starts; its parent is the
 * latest record before it (in that order) one level up. A record is open from its start until its
 * end (ts + dur): at equal times an end comes before a start (touching is not nesting), except the
 * end of a zero-length record, which comes after every start at its time. The records open are kept
 * in a binary heap of their ends, so a pass costs O(n log depth) and holds only what is open.
 *
 * Plain C99, no Python API: loaded with ctypes, which releases the GIL during each call.
 */
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t end;
    int32_t zero; /* 1: a zero-length record, whose end comes after the starts at its time */
} open_end;

typedef struct {
    int64_t lane;
    int32_t started;
    open_end *heap;
    int64_t heap_n, heap_cap;
    int64_t *last; /* last[d]: the id of the latest record at depth d */
    int64_t last_cap;
} nest_state;

nest_state *pe_nest_new(void) { return calloc(1, sizeof(nest_state)); }

void pe_nest_free(nest_state *s) {
    if (!s)
        return;
    free(s->heap);
    free(s->last);
    free(s);
}

static inline int before(open_end a, open_end b) { return a.end < b.end || (a.end == b.end && a.zero < b.zero); }

static void heap_pop(nest_state *s) {
    open_end *h = s->heap;
    open_end x = h[--s->heap_n];
    int64_t i = 0, n = s->heap_n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(h[c + 1], h[c]))
            c++;
        if (!before(h[c], x))
            break;
        h[i] = h[c];
        i = c;
    }
    if (n)
        h[i] = x;
}

static int heap_push(nest_state *s, open_end x) {
    if (s->heap_n == s->heap_cap) {
        int64_t cap = s->heap_cap ? 2 * s->heap_cap : 64;
        open_end *h = realloc(s->heap, (size_t)cap * sizeof(open_end));
        if (!h)
            return -1;
        s->heap = h;
        s->heap_cap = cap;
    }
    int64_t i = s->heap_n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(x, s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = x;
    return 0;
}

/* Depth and parent of n records (sorted as above, continuing the previous batch's order). parent[i]
 * is valid where bit i of parent_valid is set (the bitmap's bits are cleared first). Returns 0, or
 * -1 when memory ran out. A negative duration counts as zero-length. */
int64_t pe_nest(nest_state *s, int64_t n, const int64_t *lane, const int64_t *ts, const int64_t *dur,
                const int64_t *id, int32_t *depth, int64_t *parent, uint8_t *parent_valid) {
    for (int64_t i = 0; i < (n + 7) / 8; i++)
        parent_valid[i] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!s->started || lane[i] != s->lane) {
            s->started = 1;
            s->lane = lane[i];
            s->heap_n = 0;
        }
        int64_t t = ts[i];
        while (s->heap_n && (s->heap[0].end < t || (s->heap[0].end == t && !s->heap[0].zero)))
            heap_pop(s);
        int64_t d = s->heap_n;
        depth[i] = (int32_t)d;
        if (d) {
            parent[i] = s->last[d - 1];
            parent_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
        } else {
            parent[i] = 0;
        }
        if (d >= s->last_cap) {
            int64_t cap = s->last_cap ? 2 * s->last_cap : 64;
            int64_t *l = realloc(s->last, (size_t)cap * sizeof(int64_t));
            if (!l)
                return -1;
            s->last = l;
            s->last_cap = cap;
        }
        s->last[d] = id[i];
        open_end e = {dur[i] > 0 ? t + dur[i] : t, dur[i] > 0 ? 0 : 1};
        if (heap_push(s, e))
            return -1;
    }
    return 0;
}
