/* Columnar scanner for the event array of a Chrome / Kineto trace.
 *
 * pe_scan() walks a buffer holding (part of) the body of a JSON array of event objects and, for
 * each event, records where the values of the wanted keys lie: for each key k and event i,
 * starts[k * cap + i] (byte offset in the buffer) and lens[k * cap + i] (bytes; -1 when the
 * event has no such key). Keys are top-level event keys, and keys of the event's "args" object.
 * Every value is checked against the JSON grammar (strings, numbers, literals, nested objects and
 * arrays), so corrupt input is reported with its byte offset rather than passed on.
 *
 * pe_gather() then copies one key's values of n events (all, or the given rows) into Arrow's string layout (offsets, data,
 * validity), with string quotes removed, and flags the values that need Python's eye (strings
 * with escapes, literals, objects and arrays, non-integer numbers: see MODE_*).
 *
 * Plain C99 with no compiler's builtins or extensions, for any C compiler, MSVC included (the tests
 * compile it as ISO C with gcc and clang); no Python API: module.c wraps it for Python, and calls it
 * without the GIL.
 */
#include <stdint.h>
#include <string.h>

#include "native.h"

#define MAX_KEYS PE_MAX_KEYS
#define MAX_DEPTH 512

enum { NEED_MORE = -1, BAD = -2 };

typedef struct {
    const char *b;
    int64_t len;
    int64_t err; /* offset of the first byte that is not valid JSON */
} parser;

static inline int64_t skip_ws(const char *b, int64_t i, int64_t len) {
    while (i < len) {
        char c = b[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            i++;
        else
            break;
    }
    return i;
}

/* The length of the valid UTF-8 sequence that starts at s[k] (a byte >= 0x80) and ends before
 * `end`, or 0: JSON text is UTF-8, and the columns are handed to Arrow as UTF-8 without a check. */
static int utf8_length(const unsigned char *s, int64_t k, int64_t end) {
    unsigned char c = s[k];
    int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || k + n > end)
        return 0;
    for (int j = 1; j < n; j++)
        if ((s[k + j] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[k + 1] < 0xA0) || (c == 0xED && s[k + 1] >= 0xA0) || /* overlong, surrogate */
        (c == 0xF0 && s[k + 1] < 0x90) || (c == 0xF4 && s[k + 1] >= 0x90))   /* overlong, > U+10FFFF */
        return 0;
    return n;
}

/* b[k] == '\\', b[k + 1] == 'u': the UTF-16 code unit of the 4 hex digits after, NEED_MORE, or BAD. */
static int hex4(parser *p, int64_t k) {
    if (k + 6 > p->len)
        return NEED_MORE;
    int unit = 0;
    for (int j = 2; j < 6; j++) {
        char h = p->b[k + j];
        int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (v < 0) {
            p->err = k + j;
            return BAD;
        }
        unit = unit << 4 | v;
    }
    return unit;
}

/* The high bit of each byte of `w` that ends a string's plain text: '"', '\\', a control character
 * (below 0x20) or a byte of 0x80 and up (UTF-8, checked on its own). Exact for the lowest such byte
 * (a borrow only carries past a flagged byte), which is the one the caller takes. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t special_bytes(uint64_t w) {
    uint64_t q = w ^ (ONES * '"'), e = w ^ (ONES * '\\');
    return (((q - ONES) & ~q) | ((e - ONES) & ~e) | (w - ONES * 0x20) | w) & HIGHS;
}

/* The 8 bytes at s as a word whose lowest byte is s[0], on any byte order: gcc and clang compile
 * it to one load on little-endian machines. */
static inline uint64_t load_le64(const unsigned char *s) {
    return (uint64_t)s[0] | (uint64_t)s[1] << 8 | (uint64_t)s[2] << 16 | (uint64_t)s[3] << 24 |
           (uint64_t)s[4] << 32 | (uint64_t)s[5] << 40 | (uint64_t)s[6] << 48 | (uint64_t)s[7] << 56;
}

/* The byte number (0 to 7) of the lowest flagged byte of m != 0 (only high bits set), in portable
 * C rather than a compiler's count-trailing-zeros builtin: the lowest bit alone, shifted to bit 0
 * of its byte, times a constant whose byte 7 - j is j, leaves j in the top byte. */
static inline int64_t lowest_flagged_byte(uint64_t m) {
    return (int64_t)((((m & (0 - m)) >> 7) * 0x0001020304050607ULL) >> 56);
}

/* b[i] == '"'; returns the offset after the closing quote. One pass, 8 bytes at a time, over plain
 * printable ASCII; the text is checked as it goes (no control characters, valid UTF-8, valid
 * escapes). */
static int64_t skip_string(parser *p, int64_t i) {
    const unsigned char *s = (const unsigned char *)p->b;
    int64_t len = p->len, k = i + 1;
    for (;;) {
        for (; k + 8 <= len; k += 8) {
            uint64_t m = special_bytes(load_le64(s + k));
            if (m) {
                k += lowest_flagged_byte(m);
                break;
            }
        }
        for (; k < len; k++) {
            unsigned char c = s[k];
            if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
                break;
        }
        if (k >= len)
            return NEED_MORE;
        unsigned char c = s[k];
        if (c == '"')
            return k + 1;
        if (c < 0x20) {
            p->err = k;
            return BAD;
        }
        if (c >= 0x80) {
            int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
            if (need > 1 && k + need > len)
                return NEED_MORE; /* the rest of the character is in the next read */
            int n = utf8_length(s, k, len);
            if (!n) {
                p->err = k;
                return BAD;
            }
            k += n;
            continue;
        }
        /* an escape */
        if (k + 1 >= len)
            return NEED_MORE;
        char e = (char)s[k + 1];
        if (e == 'u') {
            int unit = hex4(p, k);
            if (unit < 0)
                return unit;
            if (unit >= 0xDC00 && unit <= 0xDFFF) { /* a low surrogate with no high one before it */
                p->err = k;
                return BAD;
            }
            if (unit >= 0xD800 && unit <= 0xDBFF) { /* a high surrogate: a low one must follow */
                if (k + 8 > len)
                    return NEED_MORE;
                int low = s[k + 6] == '\\' && s[k + 7] == 'u' ? hex4(p, k + 6) : BAD;
                if (low == NEED_MORE)
                    return NEED_MORE;
                if (low < 0xDC00 || low > 0xDFFF) {
                    p->err = k;
                    return BAD;
                }
                k += 6;
            }
            k += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
            k += 2;
        } else {
            p->err = k + 1;
            return BAD;
        }
    }
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static int64_t skip_number(parser *p, int64_t i) {
    const char *b = p->b;
    int64_t len = p->len, start = i;
    if (i < len && b[i] == '-')
        i++;
    if (i >= len)
        return NEED_MORE;
    if (b[i] == '0') {
        i++;
    } else if (is_digit(b[i])) {
        while (i < len && is_digit(b[i]))
            i++;
    } else {
        p->err = i;
        return BAD;
    }
    if (i < len && b[i] == '.') {
        i++;
        int64_t d = i;
        while (i < len && is_digit(b[i]))
            i++;
        if (i == d) {
            if (i >= len)
                return NEED_MORE;
            p->err = i;
            return BAD;
        }
    }
    if (i < len && (b[i] == 'e' || b[i] == 'E')) {
        i++;
        if (i < len && (b[i] == '+' || b[i] == '-'))
            i++;
        int64_t d = i;
        while (i < len && is_digit(b[i]))
            i++;
        if (i == d) {
            if (i >= len)
                return NEED_MORE;
            p->err = i;
            return BAD;
        }
    }
    if (i >= len)
        return NEED_MORE; /* a number is never last in the buffer of a complete event */
    (void)start;
    return i;
}

static int64_t skip_literal(parser *p, int64_t i, const char *word, int64_t n) {
    if (p->len - i < n)
        return memcmp(p->b + i, word, (size_t)(p->len - i)) == 0 ? NEED_MORE : (p->err = i, BAD);
    if (memcmp(p->b + i, word, (size_t)n) != 0) {
        p->err = i;
        return BAD;
    }
    return i + n;
}

typedef struct {
    int32_t n;
    const char *name[MAX_KEYS];
    int32_t nlen[MAX_KEYS];
    int32_t slot[MAX_KEYS]; /* output slot of the key */
} keyset;

typedef struct {
    int64_t *starts;
    int32_t *lens;
    int64_t cap;
    int64_t row;
    keyset top, args;
    int32_t args_slot; /* slot of the "args" key itself, or -1 */
} sink;

static int64_t skip_value(parser *p, int64_t i, int depth, sink *s, const keyset *keys);

/* b[i] == '{'. With `keys`, record the spans of their values in the sink's current row. */
static int64_t skip_object(parser *p, int64_t i, int depth, sink *s, const keyset *keys) {
    const char *b = p->b;
    int64_t len = p->len;
    if (depth > MAX_DEPTH) {
        p->err = i;
        return BAD;
    }
    i = skip_ws(b, i + 1, len);
    if (i >= len)
        return NEED_MORE;
    if (b[i] == '}')
        return i + 1;
    for (;;) {
        if (b[i] != '"') {
            p->err = i;
            return BAD;
        }
        int64_t k0 = i + 1;
        int64_t k1 = skip_string(p, i);
        if (k1 < 0)
            return k1;
        i = skip_ws(b, k1, len);
        if (i >= len)
            return NEED_MORE;
        if (b[i] != ':') {
            p->err = i;
            return BAD;
        }
        i = skip_ws(b, i + 1, len);
        if (i >= len)
            return NEED_MORE;
        int32_t slot = -1;
        int is_args = 0;
        if (keys) {
            int32_t klen = (int32_t)(k1 - 1 - k0);
            for (int32_t k = 0; k < keys->n; k++)
                if (keys->nlen[k] == klen && keys->name[k][0] == b[k0] && memcmp(keys->name[k], b + k0, (size_t)klen) == 0) {
                    slot = keys->slot[k];
                    break;
                }
            is_args = keys == &s->top && klen == 4 && memcmp(b + k0, "args", 4) == 0;
        }
        int64_t v0 = i;
        int64_t v1 = (is_args && b[i] == '{' && s->args.n) ? skip_object(p, i, depth + 1, s, &s->args)
                                                          : skip_value(p, i, depth + 1, s, NULL);
        if (v1 < 0)
            return v1;
        if (is_args && s->args_slot >= 0)
            slot = s->args_slot;
        if (slot >= 0) {
            s->starts[slot * s->cap + s->row] = v0;
            s->lens[slot * s->cap + s->row] = (int32_t)(v1 - v0);
        }
        i = skip_ws(b, v1, len);
        if (i >= len)
            return NEED_MORE;
        if (b[i] == '}')
            return i + 1;
        if (b[i] != ',') {
            p->err = i;
            return BAD;
        }
        i = skip_ws(b, i + 1, len);
        if (i >= len)
            return NEED_MORE;
    }
}

static int64_t skip_array(parser *p, int64_t i, int depth) {
    const char *b = p->b;
    int64_t len = p->len;
    if (depth > MAX_DEPTH) {
        p->err = i;
        return BAD;
    }
    i = skip_ws(b, i + 1, len);
    if (i >= len)
        return NEED_MORE;
    if (b[i] == ']')
        return i + 1;
    for (;;) {
        int64_t v1 = skip_value(p, i, depth + 1, NULL, NULL);
        if (v1 < 0)
            return v1;
        i = skip_ws(b, v1, len);
        if (i >= len)
            return NEED_MORE;
        if (b[i] == ']')
            return i + 1;
        if (b[i] != ',') {
            p->err = i;
            return BAD;
        }
        i = skip_ws(b, i + 1, len);
        if (i >= len)
            return NEED_MORE;
    }
}

static int64_t skip_value(parser *p, int64_t i, int depth, sink *s, const keyset *keys) {
    switch (p->b[i]) {
    case '"':
        return skip_string(p, i);
    case '{':
        return skip_object(p, i, depth, s, keys);
    case '[':
        return skip_array(p, i, depth);
    case 't':
        return skip_literal(p, i, "true", 4);
    case 'f':
        return skip_literal(p, i, "false", 5);
    case 'n':
        return skip_literal(p, i, "null", 4);
    default:
        return skip_number(p, i);
    }
}

/* Split "name\0name\0..." (n names) into a keyset whose slots start at `first_slot`. */
static int parse_keys(keyset *ks, const char *names, int32_t n, int32_t first_slot) {
    if (n > MAX_KEYS)
        return -1;
    ks->n = n;
    for (int32_t k = 0; k < n; k++) {
        ks->name[k] = names;
        ks->nlen[k] = (int32_t)strlen(names);
        ks->slot[k] = first_slot + k;
        names += ks->nlen[k] + 1;
    }
    return 0;
}

/* Scan events from buf[start:len]. `after_event`: the previous call stopped right after an event.
 * Top-level keys get slots 0..n_top-1 (if one of them is "args", it records the args object's
 * span), args keys n_top..n_top+n_args-1. Event i's own span goes to ev_starts/ev_lens. */
int64_t pe_scan(const char *buf, int64_t start, int64_t len, int32_t after_event, int64_t cap,
                const char *top_names, int32_t n_top, const char *args_names, int32_t n_args,
                int64_t *starts, int32_t *lens, int64_t *ev_starts, int32_t *ev_lens, scan_result *res) {
    parser p = {buf, len, -1};
    sink s;
    memset(&s, 0, sizeof s);
    s.starts = starts;
    s.lens = lens;
    s.cap = cap;
    s.args_slot = -1;
    if (parse_keys(&s.top, top_names, n_top, 0) || parse_keys(&s.args, args_names, n_args, n_top)) {
        res->status = BAD;
        res->err_pos = start;
        return -1;
    }
    for (int32_t k = 0; k < n_top; k++)
        if (s.top.nlen[k] == 4 && memcmp(s.top.name[k], "args", 4) == 0)
            s.args_slot = k;
    int32_t n_slots = n_top + n_args;
    int64_t i = start, n = 0;
    res->status = 0;
    res->after_event = after_event;
    res->consumed = start;
    for (;;) {
        i = skip_ws(buf, i, len);
        if (i >= len)
            break;
        if (after_event) {
            if (buf[i] == ']') {
                res->status = 1;
                res->consumed = i + 1;
                break;
            }
            if (buf[i] != ',') {
                res->status = BAD;
                res->err_pos = i;
                break;
            }
            after_event = 0;
            res->after_event = 0;
            res->consumed = i + 1;
            i = skip_ws(buf, i + 1, len);
            if (i >= len)
                break;
        }
        if (buf[i] == ']') { /* an empty array, or a trailing comma before ']' */
            res->status = 1;
            res->consumed = i + 1;
            break;
        }
        if (n >= cap)
            break;
        if (buf[i] != '{') {
            res->status = BAD;
            res->err_pos = i;
            break;
        }
        for (int32_t k = 0; k < n_slots; k++)
            lens[k * cap + n] = -1;
        s.row = n;
        int64_t end = skip_object(&p, i, 1, &s, &s.top);
        if (end == NEED_MORE)
            break;
        if (end == BAD) {
            res->status = BAD;
            res->err_pos = p.err;
            break;
        }
        ev_starts[n] = i;
        ev_lens[n] = (int32_t)(end - i);
        n++;
        i = end;
        after_event = 1;
        res->after_event = 1;
        res->consumed = end;
    }
    res->n = n;
    return n;
}

enum { MODE_RAW = 0, MODE_TEXT = 1, MODE_INT = 2 };

/* Copy the values of one key (spans starts[i], lens[i]; lens < 0: absent) of n events into Arrow
 * string layout. MODE_RAW copies the JSON text as it is. MODE_TEXT removes a string's quotes;
 * MODE_INT too, for integers. JSON null is absent (NULL). A value is flagged in `special` (and
 * counted in the return value) when the mode cannot turn its text into the right value alone:
 * MODE_TEXT: strings with escapes, true/false, objects, arrays, numbers that are not integers;
 * MODE_INT: anything but an integer number. `data` == NULL: only return the bytes needed. */
int64_t pe_gather(const char *buf, const int64_t *starts, const int32_t *lens, const int64_t *rows, int64_t n,
                  int32_t mode, char *data, int32_t *offsets, uint8_t *validity, uint8_t *special,
                  int64_t *n_null) {
    int64_t pos = 0, n_special = 0, nulls = 0;
    if (data == NULL) {
        for (int64_t i = 0; i < n; i++) {
            int32_t L = lens[rows ? rows[i] : i];
            if (L > 0)
                pos += L;
        }
        return pos;
    }
    memset(validity, 0, (size_t)((n + 7) / 8));
    memset(special, 0, (size_t)n);
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : i;
        int32_t L = lens[r];
        const char *v = buf + starts[r];
        if (L < 0 || (L == 4 && memcmp(v, "null", 4) == 0)) {
            nulls++;
            offsets[i + 1] = (int32_t)pos;
            continue;
        }
        validity[i >> 3] |= (uint8_t)(1u << (i & 7));
        if (mode != MODE_RAW) {
            char c = v[0];
            if (c == '"') {
                v++;
                L -= 2;
                if (mode == MODE_INT || memchr(v, '\\', (size_t)L)) {
                    special[i] = 1;
                    n_special++;
                }
            } else if (c == '-' || is_digit(c)) {
                for (int32_t k = 0; k < L; k++)
                    if (v[k] == '.' || v[k] == 'e' || v[k] == 'E') {
                        special[i] = 1;
                        n_special++;
                        break;
                    }
            } else {
                special[i] = 1;
                n_special++;
            }
        }
        memcpy(data + pos, v, (size_t)L);
        pos += L;
        offsets[i + 1] = (int32_t)pos;
    }
    *n_null = nulls;
    return n_special;
}

enum { I64_INT = 0, I64_US_NS = 1 };

/* Copy the values of one key of n events (as pe_gather) into int64 `out` with a validity bitmap,
 * parsed from their JSON text: I64_INT, integers (an optional '-' and 1 to 18 digits); I64_US_NS,
 * µs as ns (1 to 16 digits, at most 9223372036854774, then optionally '.' and 1 to 3 decimals:
 * exact, never through a float). JSON null or an absent key is NULL. Returns the number of other
 * values (quoted, more decimals, exponents, longer), which the caller converts the slow way
 * instead; `out` is then incomplete. */
int64_t pe_gather_i64(const char *buf, const int64_t *starts, const int32_t *lens, const int64_t *rows, int64_t n,
                      int32_t mode, int64_t *out, uint8_t *validity, int64_t *n_null) {
    int64_t n_other = 0, nulls = 0;
    memset(validity, 0, (size_t)((n + 7) / 8));
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : i;
        int32_t L = lens[r];
        const char *v = buf + starts[r];
        out[i] = 0;
        if (L < 0 || (L == 4 && memcmp(v, "null", 4) == 0)) {
            nulls++;
            continue;
        }
        int32_t k = 0, neg = 0;
        if (mode == I64_INT && L > 1 && v[0] == '-') {
            neg = 1;
            k = 1;
        }
        int64_t x = 0;
        int32_t digits = 0;
        while (k < L && is_digit(v[k])) {
            x = x * 10 + (v[k] - '0');
            k++;
            digits++;
        }
        /* 18 digits fit int64; so do 16 of µs (epoch µs have 16) as ns, up to its maximum */
        int ok = digits > 0 && (mode == I64_INT ? digits <= 18 : digits <= 16 && x <= 9223372036854774LL);
        if (ok && mode == I64_US_NS) {
            int32_t decimals = 0;
            int64_t frac = 0;
            if (k < L && v[k] == '.') {
                k++;
                while (k < L && is_digit(v[k]) && decimals < 4) {
                    frac = frac * 10 + (v[k] - '0');
                    k++;
                    decimals++;
                }
                ok = decimals >= 1 && decimals <= 3;
            }
            for (int32_t d = decimals; d < 3; d++)
                frac *= 10;
            x = x * 1000 + frac;
        }
        if (!ok || k != L) {
            n_other++;
            continue;
        }
        out[i] = neg ? -x : x;
        validity[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    *n_null = nulls;
    return n_other;
}
