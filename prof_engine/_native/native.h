/* The entry points of the native helpers (scan.c, host_pass.c, lanes.c), for the Python wrappers
 * of module.c: one declaration each, which the compiler checks against its definition. */
#ifndef PE_NATIVE_H
#define PE_NATIVE_H
#include <stdint.h>

typedef struct {
    int64_t consumed;    /* bytes of the buffer fully handled (events and their separators) */
    int64_t n;           /* events recorded */
    int64_t err_pos;     /* status BAD: offset of the offending byte */
    int32_t status;      /* 0: more input needed (or cap reached), 1: the array's ']' was reached, -2: bad JSON */
    int32_t after_event; /* 1 if `consumed` ends right after an event (a ',' or ']' must come next) */
} scan_result;

#define PE_MAX_KEYS 64 /* top-level keys, and args keys, that pe_scan takes at most */

int64_t pe_scan(const char *buf, int64_t start, int64_t len, int32_t after_event, int64_t cap,
                const char *top_names, int32_t n_top, const char *args_names, int32_t n_args,
                int64_t *starts, int32_t *lens, int64_t *ev_starts, int32_t *ev_lens, scan_result *res);
int64_t pe_gather(const char *buf, const int64_t *starts, const int32_t *lens, const int64_t *rows, int64_t n,
                  int32_t mode, char *data, int32_t *offsets, uint8_t *validity, uint8_t *special,
                  int64_t *n_null);
int64_t pe_gather_i64(const char *buf, const int64_t *starts, const int32_t *lens, const int64_t *rows, int64_t n,
                      int32_t mode, int64_t *out, uint8_t *validity, int64_t *n_null);

typedef struct host_pass host_pass;
host_pass *pe_host_new(int64_t n_steps, const int64_t *rank, const int64_t *start, const int64_t *end,
                       const int64_t *step, const uint8_t *known);
void pe_host_free(host_pass *s);
void pe_step_at(const host_pass *s, int64_t n, const int64_t *rank, const int64_t *ts, int64_t *step,
                uint8_t *step_valid);
int64_t pe_host_pass(host_pass *s, int64_t n, const int64_t *lane, const int64_t *rank, const int64_t *ts,
                     const int64_t *dur, const int64_t *id, const uint8_t *nests, int64_t *step, uint8_t *step_valid,
                     int32_t *depth, uint8_t *depth_valid, int64_t *parent, uint8_t *parent_valid);

typedef struct lanes_state lanes_state;
lanes_state *pe_lanes_new(void);
void pe_lanes_free(lanes_state *st);
int64_t pe_lanes(lanes_state *st, int64_t n, const int64_t *key, const uint8_t *b, const int64_t *s,
                 const int64_t *e, int64_t *out_key, int8_t *out_lane, int64_t *out_s, int64_t *out_e);
int64_t pe_lanes_finish(lanes_state *st, int64_t *out_key, int8_t *out_lane, int64_t *out_s, int64_t *out_e);

#endif
