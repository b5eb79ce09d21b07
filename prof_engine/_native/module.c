/* prof_engine._native._ext: the Python face of the native helpers (scan.c, host_pass.c, lanes.c).
 *
 * Each function parses its arguments with PyArg_ParseTuple: arrays come through the buffer
 * protocol (bytes, bytearray, memoryview, pyarrow.Buffer), and their sizes, alignment and the
 * offsets they hold are checked against the element counts before any C work, so a wrong argument
 * is a TypeError or ValueError, never a write out of bounds. The states of the passes are
 * PyCapsules that free themselves. The C work runs without the GIL: the scanner runs beside the
 * converter on a thread, and the buffers stay exported (so not resized) until the call returns.
 * A state is used by one thread at a time (each pass owns its own).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "native.h"

#define HOST_STATE "prof_engine._native._ext.host_pass"
#define LANES_STATE "prof_engine._native._ext.lanes"

/* --- buffers --------------------------------------------------------------------------------- */

/* Buffer `b` named `what` holds at least `count` items of `width` bytes, aligned to `width`. */
static int has_room(const char *fn, const char *what, const Py_buffer *b, int64_t count, int64_t width) {
    if (count < 0 || count > PY_SSIZE_T_MAX / width) {
        PyErr_Format(PyExc_ValueError, "%s: %s: a count of %lld items is out of range", fn, what, (long long)count);
        return 0;
    }
    if (b->len < count * width) {
        PyErr_Format(PyExc_ValueError, "%s: %s holds %zd bytes, needs %lld (%lld items of %lld bytes)", fn, what,
                     b->len, (long long)(count * width), (long long)count, (long long)width);
        return 0;
    }
    if (count && width > 1 && (uintptr_t)b->buf % (uintptr_t)width) {
        PyErr_Format(PyExc_ValueError, "%s: %s is not aligned to %lld bytes", fn, what, (long long)width);
        return 0;
    }
    return 1;
}

static void release(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++)
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
}

static int check_count(const char *fn, int64_t n) {
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s: n must be >= 0, got %lld", fn, (long long)n);
        return 0;
    }
    return 1;
}

/* --- scanner --------------------------------------------------------------------------------- */

/* The number of names in "name\0name\0..." (each ends with a NUL), or -1. */
static int32_t count_names(const Py_buffer *b) {
    const char *s = b->buf;
    if (b->len && s[b->len - 1] != '\0')
        return -1;
    int64_t n = 0;
    for (Py_ssize_t i = 0; i < b->len; i++) {
        if (s[i] == '\0') {
            if (i == 0 || s[i - 1] == '\0')
                return -1; /* an empty name */
            n++;
        }
    }
    return n > PE_MAX_KEYS ? -1 : (int32_t)n;
}

static PyObject *ext_scan(PyObject *self, PyObject *args) {
    Py_buffer v[7] = {{0}}; /* buf, top names, args names, starts, lens, ev_starts, ev_lens */
    long long start, end, cap;
    int after_event;
    PyObject *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLpLy*y*w*w*w*w*:scan", &v[0], &start, &end, &after_event, &cap, &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6]))
        goto done;
    int32_t n_top = count_names(&v[1]), n_args = count_names(&v[2]);
    if (n_top < 0 || n_args < 0) {
        PyErr_Format(PyExc_ValueError, "scan: key names must be NUL-terminated, non-empty, at most %d", PE_MAX_KEYS);
        goto done;
    }
    if (start < 0 || start > end || end > v[0].len) {
        PyErr_Format(PyExc_ValueError, "scan: need 0 <= start <= end <= len(buf), got %lld, %lld, %zd", start, end,
                     v[0].len);
        goto done;
    }
    if (cap < 0 || cap > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "scan: cap %lld is out of range", cap);
        goto done;
    }
    int64_t slots = (int64_t)(n_top + n_args) * cap;
    if (!has_room("scan", "starts", &v[3], slots, 8) || !has_room("scan", "lens", &v[4], slots, 4) ||
        !has_room("scan", "ev_starts", &v[5], cap, 8) || !has_room("scan", "ev_lens", &v[6], cap, 4))
        goto done;
    scan_result res = {0};
    Py_BEGIN_ALLOW_THREADS
    pe_scan(v[0].buf, start, end, after_event, cap, v[1].buf, n_top, v[2].buf, n_args, v[3].buf, v[4].buf, v[5].buf,
            v[6].buf, &res);
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("(LLLii)", (long long)res.consumed, (long long)res.n, (long long)res.err_pos, res.status,
                        res.after_event);
done:
    release(v, 7);
    return out;
}

/* The spans a gather reads: n values of `lens`/`starts` (all, or those at `rows`), each absent
 * (length < 0) or within `buf` (a string's, with both quotes); also the bytes they take. */
typedef struct {
    const char *buf;
    Py_ssize_t buf_len;
    const int64_t *starts;
    const int32_t *lens;
    const int64_t *rows;
    int64_t n, n_spans;
    int64_t bad_row; /* the first row whose span is not valid, or -1 */
    int64_t bytes;
} spans;

static void check_spans(spans *sp) {
    sp->bad_row = -1;
    sp->bytes = 0;
    for (int64_t i = 0; i < sp->n; i++) {
        int64_t r = sp->rows ? sp->rows[i] : i;
        if (r < 0 || r >= sp->n_spans) {
            sp->bad_row = i;
            return;
        }
        int32_t L = sp->lens[r];
        if (L < 0)
            continue;
        int64_t s = sp->starts[r];
        if (L == 0 || s < 0 || s > sp->buf_len - L || (sp->buf[s] == '"' && L < 2)) {
            sp->bad_row = i;
            return;
        }
        sp->bytes += L;
    }
}

/* Parse the arguments a gather shares: buf, starts, lens, rows (None: all), n. */
static int gather_args(const char *fn, Py_buffer *v, PyObject *rows, long long n, spans *sp) {
    if (!check_count(fn, n))
        return 0;
    if (rows != Py_None) {
        if (PyObject_GetBuffer(rows, &v[3], PyBUF_SIMPLE) < 0)
            return 0;
        if (!has_room(fn, "rows", &v[3], n, 8))
            return 0;
    }
    if ((v[1].len && (uintptr_t)v[1].buf % 8) || (v[2].len && (uintptr_t)v[2].buf % 4)) {
        PyErr_Format(PyExc_ValueError, "%s: starts and lens must be aligned to 8 and 4 bytes", fn);
        return 0;
    }
    int64_t n_spans = v[1].len / 8 < v[2].len / 4 ? v[1].len / 8 : v[2].len / 4;
    if (rows == Py_None && (!has_room(fn, "starts", &v[1], n, 8) || !has_room(fn, "lens", &v[2], n, 4)))
        return 0;
    *sp = (spans){v[0].buf, v[0].len, v[1].buf, v[2].buf, rows == Py_None ? NULL : v[3].buf, n, n_spans, -1, 0};
    return 1;
}

static int spans_ok(const char *fn, const spans *sp) {
    if (sp->bad_row >= 0) {
        PyErr_Format(PyExc_ValueError, "%s: value %lld: its row or span lies outside starts, lens or buf", fn,
                     (long long)sp->bad_row);
        return 0;
    }
    return 1;
}

static PyObject *ext_gather_size(PyObject *self, PyObject *args) {
    Py_buffer v[4] = {{0}};
    PyObject *rows, *out = NULL;
    long long n;
    spans sp;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*OL:gather_size", &v[0], &v[1], &v[2], &rows, &n) ||
        !gather_args("gather_size", v, rows, n, &sp))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    check_spans(&sp);
    Py_END_ALLOW_THREADS
    if (spans_ok("gather_size", &sp))
        out = PyLong_FromLongLong(sp.bytes);
done:
    release(v, 4);
    return out;
}

static PyObject *ext_gather(PyObject *self, PyObject *args) {
    Py_buffer v[8] = {{0}}; /* buf, starts, lens, rows, data, offsets, validity, special */
    PyObject *rows, *out = NULL;
    long long n;
    int mode;
    spans sp;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*OLiw*w*w*w*:gather", &v[0], &v[1], &v[2], &rows, &n, &mode, &v[4], &v[5],
                          &v[6], &v[7]) ||
        !gather_args("gather", v, rows, n, &sp))
        goto done;
    if (mode < 0 || mode > 2) {
        PyErr_Format(PyExc_ValueError, "gather: mode must be 0 (raw), 1 (text) or 2 (int), got %d", mode);
        goto done;
    }
    if (!has_room("gather", "offsets", &v[5], n + 1, 4) || !has_room("gather", "validity", &v[6], (n + 7) / 8, 1) ||
        !has_room("gather", "special", &v[7], n, 1))
        goto done;
    int64_t n_special = 0, n_null = 0;
    int fits = 0;
    Py_BEGIN_ALLOW_THREADS
    check_spans(&sp);
    fits = sp.bad_row < 0 && sp.bytes <= v[4].len && sp.bytes <= INT32_MAX;
    if (fits)
        n_special = pe_gather(sp.buf, sp.starts, sp.lens, sp.rows, n, mode, v[4].buf, v[5].buf, v[6].buf, v[7].buf,
                              &n_null);
    Py_END_ALLOW_THREADS
    if (!spans_ok("gather", &sp))
        goto done;
    if (!fits) {
        PyErr_Format(PyExc_ValueError, "gather: data holds %zd bytes, the values take %lld (at most 2**31 - 1)",
                     v[4].len, (long long)sp.bytes);
        goto done;
    }
    out = Py_BuildValue("(LL)", (long long)n_special, (long long)n_null);
done:
    release(v, 8);
    return out;
}

static PyObject *ext_gather_i64(PyObject *self, PyObject *args) {
    Py_buffer v[6] = {{0}}; /* buf, starts, lens, rows, out, validity */
    PyObject *rows, *out = NULL;
    long long n;
    int mode;
    spans sp;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*OLiw*w*:gather_i64", &v[0], &v[1], &v[2], &rows, &n, &mode, &v[4], &v[5]) ||
        !gather_args("gather_i64", v, rows, n, &sp))
        goto done;
    if (mode < 0 || mode > 1) {
        PyErr_Format(PyExc_ValueError, "gather_i64: mode must be 0 (int) or 1 (us as ns), got %d", mode);
        goto done;
    }
    if (!has_room("gather_i64", "out", &v[4], n, 8) || !has_room("gather_i64", "validity", &v[5], (n + 7) / 8, 1))
        goto done;
    int64_t n_other = 0, n_null = 0;
    Py_BEGIN_ALLOW_THREADS
    check_spans(&sp);
    if (sp.bad_row < 0)
        n_other = pe_gather_i64(sp.buf, sp.starts, sp.lens, sp.rows, n, mode, v[4].buf, v[5].buf, &n_null);
    Py_END_ALLOW_THREADS
    if (spans_ok("gather_i64", &sp))
        out = Py_BuildValue("(LL)", (long long)n_other, (long long)n_null);
done:
    release(v, 6);
    return out;
}

/* --- host pass ------------------------------------------------------------------------------- */

static void host_destroy(PyObject *capsule) { pe_host_free(PyCapsule_GetPointer(capsule, HOST_STATE)); }

static void *state_of(PyObject *capsule, const char *name, const char *fn, const char *maker) {
    if (!PyCapsule_IsValid(capsule, name)) {
        PyErr_Format(PyExc_TypeError, "%s: state must be what %s() returned", fn, maker);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, name);
}

static PyObject *ext_host_new(PyObject *self, PyObject *args) {
    Py_buffer v[5] = {{0}}; /* rank, start, end, step, known */
    long long n;
    PyObject *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ly*y*y*y*y*:host_new", &n, &v[0], &v[1], &v[2], &v[3], &v[4]))
        goto done;
    if (!check_count("host_new", n) || !has_room("host_new", "rank", &v[0], n, 8) ||
        !has_room("host_new", "start", &v[1], n, 8) || !has_room("host_new", "end", &v[2], n, 8) ||
        !has_room("host_new", "step", &v[3], n, 8) || !has_room("host_new", "known", &v[4], n, 1))
        goto done;
    host_pass *state;
    Py_BEGIN_ALLOW_THREADS
    state = pe_host_new(n, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf);
    Py_END_ALLOW_THREADS
    if (!state) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyCapsule_New(state, HOST_STATE, host_destroy);
    if (!out)
        pe_host_free(state);
done:
    release(v, 5);
    return out;
}

static PyObject *ext_step_at(PyObject *self, PyObject *args) {
    Py_buffer v[4] = {{0}}; /* rank, ts, step, step_valid */
    PyObject *capsule, *out = NULL;
    long long n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLy*y*w*w*:step_at", &capsule, &n, &v[0], &v[1], &v[2], &v[3]))
        goto done;
    const host_pass *state = state_of(capsule, HOST_STATE, "step_at", "host_new");
    if (!state || !check_count("step_at", n) || !has_room("step_at", "rank", &v[0], n, 8) ||
        !has_room("step_at", "ts", &v[1], n, 8) || !has_room("step_at", "step", &v[2], n, 8) ||
        !has_room("step_at", "step_valid", &v[3], (n + 7) / 8, 1))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    pe_step_at(state, n, v[0].buf, v[1].buf, v[2].buf, v[3].buf);
    Py_END_ALLOW_THREADS
    out = Py_NewRef(Py_None);
done:
    release(v, 4);
    return out;
}

static PyObject *ext_host_pass(PyObject *self, PyObject *args) {
    /* lane, rank, ts, dur, id, nests; step, step_valid, depth, depth_valid, parent, parent_valid */
    Py_buffer v[12] = {{0}};
    PyObject *capsule, *out = NULL;
    long long n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLy*y*y*y*y*y*w*w*w*w*w*w*:host_pass", &capsule, &n, &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]))
        goto done;
    static const char *names[12] = {"lane", "rank", "ts", "dur", "id", "nests",
                                    "step", "step_valid", "depth", "depth_valid", "parent", "parent_valid"};
    static const int64_t widths[12] = {8, 8, 8, 8, 8, 1, 8, 0, 4, 0, 8, 0}; /* 0: a bitmap */
    host_pass *state = state_of(capsule, HOST_STATE, "host_pass", "host_new");
    if (!state || !check_count("host_pass", n))
        goto done;
    for (int i = 0; i < 12; i++)
        if (!has_room("host_pass", names[i], &v[i], widths[i] ? n : (n + 7) / 8, widths[i] ? widths[i] : 1))
            goto done;
    int64_t got;
    Py_BEGIN_ALLOW_THREADS
    got = pe_host_pass(state, n, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf, v[6].buf, v[7].buf,
                       v[8].buf, v[9].buf, v[10].buf, v[11].buf);
    Py_END_ALLOW_THREADS
    if (got < 0)
        PyErr_NoMemory();
    else
        out = Py_NewRef(Py_None);
done:
    release(v, 12);
    return out;
}

/* --- lane pass ------------------------------------------------------------------------------- */

static void lanes_destroy(PyObject *capsule) { pe_lanes_free(PyCapsule_GetPointer(capsule, LANES_STATE)); }

static PyObject *ext_lanes_new(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    lanes_state *state = pe_lanes_new();
    if (!state)
        return PyErr_NoMemory();
    PyObject *out = PyCapsule_New(state, LANES_STATE, lanes_destroy);
    if (!out)
        pe_lanes_free(state);
    return out;
}

/* out_key, out_lane, out_s, out_e (v[first..first+3]) hold `room` rows. */
static int lanes_room(const char *fn, Py_buffer *v, int64_t room) {
    return has_room(fn, "out_key", &v[0], room, 8) && has_room(fn, "out_lane", &v[1], room, 1) &&
           has_room(fn, "out_s", &v[2], room, 8) && has_room(fn, "out_e", &v[3], room, 8);
}

static PyObject *ext_lanes(PyObject *self, PyObject *args) {
    Py_buffer v[8] = {{0}}; /* key, b, s, e, out_key, out_lane, out_s, out_e */
    PyObject *capsule, *out = NULL;
    long long n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLy*y*y*y*w*w*w*w*:lanes", &capsule, &n, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                          &v[6], &v[7]))
        goto done;
    lanes_state *state = state_of(capsule, LANES_STATE, "lanes", "lanes_new");
    if (!state || !check_count("lanes", n) || n > (PY_SSIZE_T_MAX / 8 - 6) / 6 || !has_room("lanes", "key", &v[0], n, 8) ||
        !has_room("lanes", "b", &v[1], n, 1) || !has_room("lanes", "s", &v[2], n, 8) ||
        !has_room("lanes", "e", &v[3], n, 8) || !lanes_room("lanes", &v[4], 6 * n + 6))
        goto done;
    int64_t got;
    Py_BEGIN_ALLOW_THREADS
    got = pe_lanes(state, n, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf, v[6].buf, v[7].buf);
    Py_END_ALLOW_THREADS
    if (got < 0)
        PyErr_SetString(PyExc_ValueError, "lanes: rows out of order (they must be sorted by key, then start)");
    else
        out = PyLong_FromLongLong(got);
done:
    release(v, 8);
    return out;
}

static PyObject *ext_lanes_finish(PyObject *self, PyObject *args) {
    Py_buffer v[4] = {{0}}; /* out_key, out_lane, out_s, out_e */
    PyObject *capsule, *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ow*w*w*w*:lanes_finish", &capsule, &v[0], &v[1], &v[2], &v[3]))
        goto done;
    lanes_state *state = state_of(capsule, LANES_STATE, "lanes_finish", "lanes_new");
    if (!state || !lanes_room("lanes_finish", v, 6))
        goto done;
    int64_t got;
    Py_BEGIN_ALLOW_THREADS
    got = pe_lanes_finish(state, v[0].buf, v[1].buf, v[2].buf, v[3].buf);
    Py_END_ALLOW_THREADS
    out = PyLong_FromLongLong(got);
done:
    release(v, 4);
    return out;
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"scan", ext_scan, METH_VARARGS, "Scan events of a Chrome trace's event array (see scan.c)."},
    {"gather_size", ext_gather_size, METH_VARARGS, "Bytes one key's values take (checks their spans)."},
    {"gather", ext_gather, METH_VARARGS, "One key's values into Arrow's string layout."},
    {"gather_i64", ext_gather_i64, METH_VARARGS, "One key's values parsed to int64."},
    {"host_new", ext_host_new, METH_VARARGS, "A host pass over the given steps (see host_pass.c)."},
    {"step_at", ext_step_at, METH_VARARGS, "The steps of records in any order."},
    {"host_pass", ext_host_pass, METH_VARARGS, "Step, depth and parent of sorted host records."},
    {"lanes_new", ext_lanes_new, METH_NOARGS, "A lane pass (see lanes.c)."},
    {"lanes", ext_lanes, METH_VARARGS, "The lanes of sorted intervals; returns the rows written."},
    {"lanes_finish", ext_lanes_finish, METH_VARARGS, "The last key's lanes; returns the rows written."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ext", "prof-engine's native helpers: the trace scanner and the host and lane passes.",
    0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&module); }
