/* The host pass of finalisation: each host record's step, and the depth and parent of those that
 * nest, in one pass over the host records sorted by (lane, ts, dur descending, id), fed in batches
 * (see prof_engine/store/host_pass.py). A lane is one thread of one rank.
 *
 * Step: the step of the record's rank with the latest start at or before the record's start, if
 * the record starts before that step ends (`set_step`, which pe_step_at also serves for records in
 * any order: the `step_at` function of finalisation's SQL).
 *
 * Nesting, torch.profiler's tree (torch/autograd/profiler_util.py, EventList._populate_cpu_children):
 * in that order, a stack of the lane's nesting records, each inside the ones below it. A record
 * pops the records it does not lie within (it starts at or after their end, or ends after it: a
 * record that overlaps another without nesting in it closes it for the records after it), then
 * the top of the stack is its parent and the stack's height its depth, and it is pushed. Touching
 * is not nesting, and a zero-length record holds nothing. A pass costs O(n) and holds only the
 * stack.
 *
 * Plain C99, no Python API: module.c wraps it for Python, and calls it without the GIL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

typedef struct {
    int64_t end, id;
} open_record;

struct host_pass {
    int64_t n_steps;    /* the steps, sorted by (rank, start) */
    int64_t *step_rank, *step_start, *step_end, *step_id;
    uint8_t *step_known; /* 0: a step record without a step number (NULL) */
    int64_t lane;
    int32_t started;
    int64_t rank_begin, rank_end; /* the lane's rank's steps: [rank_begin, rank_end) */
    open_record *stack; /* the lane's records that may still hold the next one, outermost first */
    int64_t stack_n, stack_cap;
};

static int64_t *copy64(const int64_t *src, int64_t n) {
    int64_t *p = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (p && n)
        memcpy(p, src, (size_t)n * sizeof(int64_t));
    return p;
}

void pe_host_free(host_pass *s) {
    if (!s)
        return;
    free(s->step_rank);
    free(s->step_start);
    free(s->step_end);
    free(s->step_id);
    free(s->step_known);
    free(s->stack);
    free(s);
}

/* A pass over records of the given steps (sorted by rank, then start; `known`: 0 where the step
 * number is NULL); NULL when out of memory. */
host_pass *pe_host_new(int64_t n_steps, const int64_t *rank, const int64_t *start, const int64_t *end,
                       const int64_t *step, const uint8_t *known) {
    host_pass *s = calloc(1, sizeof(host_pass));
    if (!s)
        return NULL;
    s->n_steps = n_steps;
    s->step_rank = copy64(rank, n_steps);
    s->step_start = copy64(start, n_steps);
    s->step_end = copy64(end, n_steps);
    s->step_id = copy64(step, n_steps);
    s->step_known = malloc((size_t)(n_steps ? n_steps : 1));
    if (s->step_known && n_steps)
        memcpy(s->step_known, known, (size_t)n_steps);
    if (!s->step_rank || !s->step_start || !s->step_end || !s->step_id || !s->step_known) {
        pe_host_free(s);
        return NULL;
    }
    return s;
}

/* `items` (`*cap` of `size` bytes each) with room for item `need`, doubled if it had none; NULL
 * when memory ran out (`items` stays valid). */
static void *grown(void *items, int64_t *cap, int64_t need, size_t size) {
    if (need < *cap)
        return items;
    int64_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(items, (size_t)c * size);
    if (p)
        *cap = c;
    return p;
}

/* The first step of `rank` or later ranks (steps are sorted by rank). */
static int64_t first_step_of(const host_pass *s, int64_t rank) {
    int64_t lo = 0, hi = s->n_steps;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (s->step_rank[mid] < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline void set_bit(uint8_t *bits, int64_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* step[i] (and bit i of step_valid) for time t, of the steps [begin, end) of its rank: the latest
 * started at or before t, if t is before that step's end and the step has a number. */
static void set_step(const host_pass *s, int64_t begin, int64_t end, int64_t t, int64_t i, int64_t *step,
                     uint8_t *step_valid) {
    int64_t lo = begin, hi = end;
    while (lo < hi) { /* the first of the steps started after t */
        int64_t mid = lo + (hi - lo) / 2;
        if (s->step_start[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t k = lo - 1;
    step[i] = 0;
    if (k >= begin && t < s->step_end[k] && s->step_known[k]) {
        step[i] = s->step_id[k];
        set_bit(step_valid, i);
    }
}

/* The steps of n records in any order (the `step_at` function of finalisation's SQL). */
void pe_step_at(const host_pass *s, int64_t n, const int64_t *rank, const int64_t *ts, int64_t *step,
                uint8_t *step_valid) {
    memset(step_valid, 0, (size_t)((n + 7) / 8));
    for (int64_t i = 0; i < n; i++)
        set_step(s, first_step_of(s, rank[i]), first_step_of(s, rank[i] + 1), ts[i], i, step, step_valid);
}

/* Step, depth and parent of n records (sorted as above, continuing the previous batch's order).
 * nests[i]: whether record i nests (else its depth and parent are NULL). Each output's value i is
 * valid where bit i of its bitmap is set. Returns 0, or -1 when memory ran out. A negative
 * duration counts as zero-length. */
int64_t pe_host_pass(host_pass *s, int64_t n, const int64_t *lane, const int64_t *rank, const int64_t *ts,
                     const int64_t *dur, const int64_t *id, const uint8_t *nests, int64_t *step, uint8_t *step_valid,
                     int32_t *depth, uint8_t *depth_valid, int64_t *parent, uint8_t *parent_valid) {
    int64_t bytes = (n + 7) / 8;
    memset(step_valid, 0, (size_t)bytes);
    memset(depth_valid, 0, (size_t)bytes);
    memset(parent_valid, 0, (size_t)bytes);
    for (int64_t i = 0; i < n; i++) {
        int64_t t = ts[i];
        if (!s->started || lane[i] != s->lane) {
            s->started = 1;
            s->lane = lane[i];
            s->stack_n = 0;
            s->rank_begin = first_step_of(s, rank[i]);
            s->rank_end = first_step_of(s, rank[i] + 1);
        }
        set_step(s, s->rank_begin, s->rank_end, t, i, step, step_valid);
        depth[i] = 0;
        parent[i] = 0;
        if (!nests[i])
            continue;
        /* a record that would end past the clock's end ends there (SQL's ts + dur errs elsewhere) */
        int64_t end = dur[i] <= 0 ? t : t > INT64_MAX - dur[i] ? INT64_MAX : t + dur[i];
        while (s->stack_n && (t >= s->stack[s->stack_n - 1].end || end > s->stack[s->stack_n - 1].end))
            s->stack_n--;
        int64_t d = s->stack_n;
        depth[i] = (int32_t)d;
        set_bit(depth_valid, i);
        if (d) {
            parent[i] = s->stack[d - 1].id;
            set_bit(parent_valid, i);
        }
        open_record *stack = grown(s->stack, &s->stack_cap, d, sizeof *stack);
        if (!stack)
            return -1;
        s->stack = stack;
        s->stack[s->stack_n++] = (open_record){end, id[i]};
    }
    return 0;
}
