/* The lane pass of finalisation: the Overlap Analysis lanes of intervals, in one pass over them
 * sorted by key and start. Before each row it knows the reach (running maximum of the ends) of
 * the key's a, b and all intervals; a row longer than 0 that starts beyond its class's reach opens
 * an island of that class, and the island before it ends at that reach. Between two consecutive
 * starts s_i <= s_j every interval covering [s_i, s_j) started at or before s_i, so b less a
 * there is [max(s_i, reach_a), min(reach_b, s_j)). tests/data/lanes_oracle.sql computes the same
 * lanes with DuckDB windows, as the tests' oracle.
 *
 * In: rows (key, b, s, e), keys ascending (a key is any number: rows of one key are one group) and
 * starts ascending within a key; b: 0 for the first class of intervals (a: computing), 1 for the
 * second (b: communication). Out: rows (key, lane, s, e) of four lanes per key: 0, the union of the
 * a intervals; 1, the union of the b intervals; 2, the parts of b's union that a's union does not
 * cover; 3, the gaps of all of them within the key's span (from its first start to its last end,
 * empty intervals included). Unions merge overlapping, nested and touching intervals.
 *
 * Plain C99, no Python API: module.c wraps it for Python, and calls it without the GIL.
 */
#include <stdint.h>
#include <stdlib.h>

#include "native.h"

struct lanes_state {
    int32_t started;   /* a key is open */
    int64_t key;
    int32_t has_a, has_b, has_all; /* reaches known: the running maximum of the ends of the key's */
    int64_t ra, rb, rall;          /* a, b and all intervals longer than 0 before the row */
    int32_t has_sa, has_sb;        /* the start of the current island of a, of b */
    int64_t sa, sb;
    int64_t prev_s;                /* the previous row's start (there is one once started) */
    int32_t has_first;
    int64_t span_s, span_e, first_s, last_s;
    int32_t has_piece;             /* lane 2: the piece being merged */
    int64_t piece_s, piece_e;
};

typedef struct {
    int64_t *key, *s, *e;
    int8_t *lane;
    int64_t n;
} lanes_out;

lanes_state *pe_lanes_new(void) { return calloc(1, sizeof(lanes_state)); }

void pe_lanes_free(lanes_state *st) { free(st); }

static void emit(lanes_out *o, int64_t key, int8_t lane, int64_t s, int64_t e) {
    o->key[o->n] = key;
    o->lane[o->n] = lane;
    o->s[o->n] = s;
    o->e[o->n] = e;
    o->n++;
}

/* A piece of lane 2: merged with the one before where they touch (pieces come in order of start,
 * apart from each other but where they touch). */
static void piece(lanes_state *st, lanes_out *o, int64_t s, int64_t e) {
    if (st->has_piece && s <= st->piece_e) {
        if (e > st->piece_e)
            st->piece_e = e;
        return;
    }
    if (st->has_piece)
        emit(o, st->key, 2, st->piece_s, st->piece_e);
    st->has_piece = 1;
    st->piece_s = s;
    st->piece_e = e;
}

/* The open key's last lanes: its last islands, the piece of b after its last start, its gaps
 * before its first and after its last interval. At most 6 rows. */
static void finish_key(lanes_state *st, lanes_out *o) {
    if (!st->started)
        return;
    if (st->has_sa)
        emit(o, st->key, 0, st->sa, st->ra);
    if (st->has_sb)
        emit(o, st->key, 1, st->sb, st->rb);
    if (st->has_b) {
        int64_t from = st->has_a && st->ra > st->last_s ? st->ra : st->last_s;
        if (st->rb > from)
            piece(st, o, from, st->rb);
    }
    if (st->has_piece)
        emit(o, st->key, 2, st->piece_s, st->piece_e);
    int64_t first = st->has_first ? st->first_s : st->span_e;
    if (first > st->span_s)
        emit(o, st->key, 3, st->span_s, first);
    if (st->has_all && st->span_e > st->rall)
        emit(o, st->key, 3, st->rall, st->span_e);
    st->started = 0;
}

/* Pass over n rows (continuing the previous call's, in the same order); out_* hold room for
 * 6 * n + 6 rows (a key's first row gives none, each later one at most 3, its end at most 6).
 * Returns the rows written, or -1 where the rows are out of order. */
int64_t pe_lanes(lanes_state *st, int64_t n, const int64_t *key, const uint8_t *b, const int64_t *s,
                 const int64_t *e, int64_t *out_key, int8_t *out_lane, int64_t *out_s, int64_t *out_e) {
    lanes_out o = {out_key, out_s, out_e, out_lane, 0};
    for (int64_t i = 0; i < n; i++) {
        if (st->started && key[i] != st->key) {
            if (key[i] < st->key)
                return -1;
            finish_key(st, &o);
        }
        if (!st->started) {
            lanes_state fresh = {0};
            *st = fresh;
            st->started = 1;
            st->key = key[i];
            st->span_s = s[i];
            st->span_e = e[i];
            st->prev_s = s[i];
        } else if (s[i] < st->prev_s) {
            return -1;
        }
        int64_t si = s[i], ei = e[i];
        int pos = ei > si, is_b = b[i] != 0;
        int a_start = !is_b && pos && (!st->has_a || si > st->ra);
        int b_start = is_b && pos && (!st->has_b || si > st->rb);
        int all_start = pos && (!st->has_all || si > st->rall);
        if (a_start && st->has_sa)
            emit(&o, st->key, 0, st->sa, st->ra);
        if (b_start && st->has_sb)
            emit(&o, st->key, 1, st->sb, st->rb);
        if (all_start && st->has_all)
            emit(&o, st->key, 3, st->rall, si);
        if (st->has_b) { /* b less a between the previous start and this one */
            int64_t from = st->has_a && st->ra > st->prev_s ? st->ra : st->prev_s;
            int64_t to = st->rb < si ? st->rb : si;
            if (to > from)
                piece(st, &o, from, to);
        }
        if (pos) {
            if (!is_b && (!st->has_a || ei > st->ra))
                st->ra = ei, st->has_a = 1;
            if (is_b && (!st->has_b || ei > st->rb))
                st->rb = ei, st->has_b = 1;
            if (!st->has_all || ei > st->rall)
                st->rall = ei, st->has_all = 1;
            if (!st->has_first)
                st->first_s = si, st->has_first = 1;
        }
        if (a_start)
            st->sa = si, st->has_sa = 1;
        if (b_start)
            st->sb = si, st->has_sb = 1;
        if (ei > st->span_e)
            st->span_e = ei;
        st->prev_s = si;
        st->last_s = si;
    }
    return o.n;
}

/* The last key's lanes, after the last rows: out_* hold room for 6 rows. */
int64_t pe_lanes_finish(lanes_state *st, int64_t *out_key, int8_t *out_lane, int64_t *out_s, int64_t *out_e) {
    lanes_out o = {out_key, out_s, out_e, out_lane, 0};
    finish_key(st, &o);
    return o.n;
}
