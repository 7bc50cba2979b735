/*
 * ringside._ringside: the C backend of the ringside package, over ringside_producer.h.
 *
 * A Core is one attached rs_bot; a Handle is one registered metric of it, whose methods are the
 * hot path: an exact int or float is converted here and written with one rs_bot_* call; any
 * other value goes to the handle's `convert` (ringside/_values.py), which returns the value to
 * store or raises the error that names the metric and the value. Both backends share that
 * converter, so they take and refuse the same values with the same messages.
 *
 * Every call holds the GIL, so a Core's close() never runs while another thread records through
 * it: records after close() raise RingError instead of touching unmapped memory. Python code run
 * by a call (a converter, the exemplar encoder, the thread's name) may let another thread close
 * it, so a call checks that its bot is open after the last Python code it runs, then records.
 * Lanes, threads and fork are the C producer's: per-thread lanes retired at thread exit; in a
 * forked child, the first record, registration or lane claim through a bot of the parent makes the
 * child a worker of the bot, writing a file of its own (WORKERS AND FORK in ringside_producer.h),
 * so a Handle the child inherited keeps working. A gauge's running value (inc, dec) starts from 0
 * in the child, as in any new process.
 *
 * Thread names (THREAD NAMES in ringside.h): a thread's first record through a bot claims its lane,
 * which the C producer names after the kernel's name for the thread; the Python thread's name
 * (threading's) replaces it at once, before the thread's first record is written.
 *
 * Exemplars (EXEMPLARS in ringside.h): observe() and stop() take one, a dict of str to str that the
 * C code encodes ("key=value" pairs joined by newlines), checking rs_exemplar_check's rules as it
 * copies; any other exemplar, or one that fails, goes to the handle's Python encoder
 * (ringside/_exemplars.py), which raises the error naming the problem (or returns the bytes, which
 * rs_exemplar_check checks).
 *
 * Values of steps (VALUES in ringside.h, format 4): a signed or fractional histogram, and a
 * fractional counter, record a float through rs_bot_record_value or rs_bot_count_value, which
 * round it to the metric's steps and clamp and count what it cannot hold; an int is turned into
 * steps exactly (here, or by the converter, which hands back an infinity for one out of range).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ringside_producer.h"

#include <pthread.h>

static PyObject *RingError; /* ringside._errors.RingError */
static PyObject *RingValueError;
static PyObject *current_thread_name; /* ringside._threadname.current: () -> the name as a lane holds it */
static PyObject *exemplar_keyword;    /* "exemplar", interned: a call's keyword is the same object */

/* MARK: - Core: an attached bot */

typedef struct {
    PyObject_HEAD
    rs_bot *bot;      /* NULL once closed */
    PyObject *name;   /* str */
} CoreObject;

static PyTypeObject CoreType;

static PyObject *raise_rs_error(const rs_error *error) {
    PyObject *type = error->code == RS_E_INVALID ? RingValueError : RingError;
    PyErr_SetString(type, error->message[0] ? error->message : rs_strerror(error->code));
    return NULL;
}

static int core_check_open(CoreObject *core) {
    if (core->bot != NULL) return 0;
    PyErr_Format(RingError, "bot %U is closed", core->name);
    return -1;
}

/* attach(name, directory, lane_capacity, max_metrics, max_lanes, mode, worker, max_workers, sample_above_percent) */
static PyObject *ringside_attach(PyObject *Py_UNUSED(module), PyObject *args) {
    const char *name, *directory = NULL;
    unsigned long long lane_capacity = 0;
    unsigned int max_metrics = 0, max_lanes = 0, mode = 0600;
    int worker = 0;
    unsigned int max_workers = 0, sample_above_percent = 0;
    PyObject *lane_capacity_object, *max_metrics_object, *max_lanes_object, *max_workers_object, *percent_object;
    if (!PyArg_ParseTuple(args, "szOOOIpOO", &name, &directory, &lane_capacity_object, &max_metrics_object,
                          &max_lanes_object, &mode, &worker, &max_workers_object, &percent_object)) return NULL;
    if (percent_object != Py_None) {
        unsigned long value = PyLong_AsUnsignedLong(percent_object);
        if (PyErr_Occurred() || value == 0 || value > 100) {
            PyErr_Clear();
            return PyErr_Format(RingValueError, "bot %s: sample_above_percent %R must be from 1 to 100 (100: never sample)",
                                name, percent_object);
        }
        sample_above_percent = (unsigned int)value;
    }
    if (max_workers_object != Py_None) {
        unsigned long value = PyLong_AsUnsignedLong(max_workers_object);
        if (PyErr_Occurred() || value == 0 || value > RS_MAX_WORKERS) {
            PyErr_Clear();
            return PyErr_Format(RingValueError, "bot %s: max_workers %R must be from 1 to %u", name, max_workers_object,
                                RS_MAX_WORKERS);
        }
        max_workers = (unsigned int)value;
    }
    if (lane_capacity_object != Py_None) {
        lane_capacity = PyLong_AsUnsignedLongLong(lane_capacity_object);
        if (PyErr_Occurred() || lane_capacity == 0) {
            PyErr_Clear();
            return PyErr_Format(RingValueError, "bot %s: lane_capacity %R must be a power of two from 16 to 2^28 records",
                                name, lane_capacity_object);
        }
    }
    if (max_metrics_object != Py_None) {
        unsigned long value = PyLong_AsUnsignedLong(max_metrics_object);
        if (PyErr_Occurred() || value == 0 || value > 4096) {
            PyErr_Clear();
            return PyErr_Format(RingValueError, "bot %s: max_metrics %R must be from 1 to 4096", name, max_metrics_object);
        }
        max_metrics = (unsigned int)value;
    }
    if (max_lanes_object != Py_None) {
        unsigned long value = PyLong_AsUnsignedLong(max_lanes_object);
        if (PyErr_Occurred() || value == 0 || value > RS_MAX_LANES) {
            PyErr_Clear();
            return PyErr_Format(RingValueError, "bot %s: max_lanes %R must be from 1 to %d", name, max_lanes_object, RS_MAX_LANES);
        }
        max_lanes = (unsigned int)value;
    }
    if (mode > 0777) return PyErr_Format(RingValueError, "bot %s: mode %o must hold permission bits only (0 to 0o777)", name, mode);
    rs_bot_options options = {0};
    options.directory = directory;
    options.lane_capacity = lane_capacity;
    options.max_metrics = max_metrics;
    options.max_lanes = max_lanes;
    options.mode = (mode_t)mode;
    options.worker = worker; /* the file <name>@<pid>, one of the bot's workers */
    options.max_workers = max_workers;
    options.sample_above_percent = sample_above_percent; /* SAMPLING in ringside.h; 0: the default */
    rs_bot *bot = NULL;
    rs_error error;
    int code;
    Py_BEGIN_ALLOW_THREADS /* creating and reserving the file may take milliseconds */
    code = rs_bot_attach(&bot, name, &options, &error);
    Py_END_ALLOW_THREADS
    if (code < 0) return raise_rs_error(&error);
    CoreObject *core = PyObject_New(CoreObject, &CoreType);
    if (core == NULL) {
        rs_bot_detach(bot);
        return NULL;
    }
    core->bot = bot;
    core->name = PyUnicode_FromString(name);
    if (core->name == NULL) {
        Py_DECREF(core);
        return NULL;
    }
    return (PyObject *)core;
}

static void core_dealloc(CoreObject *core) {
    if (core->bot != NULL) rs_bot_detach(core->bot);
    Py_XDECREF(core->name);
    PyObject_Free(core);
}

/* register(name, kind, unit, labels: bytes, help: str, sample_every, merge: rs_gauge_merge, form: rs_value_form = 0,
   scale = 0) -> index */
static PyObject *core_register(CoreObject *core, PyObject *args) {
    const char *name, *labels, *help;
    Py_ssize_t name_length, labels_length, help_length;
    int kind, unit, merge, form = 0, scale = 0;
    unsigned long sample_every;
    if (!PyArg_ParseTuple(args, "s#iiy#s#ki|ii", &name, &name_length, &kind, &unit, &labels, &labels_length,
                          &help, &help_length, &sample_every, &merge, &form, &scale)) return NULL;
    if (core_check_open(core) < 0) return NULL;
    if (sample_every == 0 || sample_every > UINT32_MAX)
        return PyErr_Format(RingValueError, "bot %U: metric %s: sample_every %lu must be from 1 to 2^32-1",
                            core->name, name, sample_every);
    if (merge < 0 || (unsigned)merge >= RS_MERGE_POLICIES)
        return PyErr_Format(RingValueError, "bot %U: metric %s: unknown gauge merge policy %d", core->name, name, merge);
    /* The C producer checks both; these keep them from wrapping into the bytes it takes. */
    if (form < 0 || form > UINT8_MAX) return PyErr_Format(RingValueError, "bot %U: metric %s: unknown value form %d", core->name, name, form);
    if (scale < RS_SCALE_MIN || scale > RS_SCALE_MAX)
        return PyErr_Format(RingValueError, "bot %U: metric %s: scale %d is not from %d to %d", core->name, name, scale,
                            RS_SCALE_MIN, RS_SCALE_MAX);
    rs_metric metric;
    rs_error error;
    rs_values values = {(uint8_t)form, (int8_t)scale};
    if (rs_bot_register_encoded(core->bot, &metric, name, (size_t)name_length, (rs_kind)kind, (rs_unit)unit,
                                values, labels, (size_t)labels_length, help, (size_t)help_length, (uint32_t)sample_every,
                                (rs_gauge_merge)merge, &error) < 0) return raise_rs_error(&error);
    return PyLong_FromUnsignedLong(metric.index);
}

static inline int core_ready(CoreObject *core);
static void count_clamped(rs_bot *bot, uint32_t index);

/* count_refused(index, exemplar: bool): a value metric `index` could not take as given, counted in
   its cell's `clamped`, or an exemplar refused (`exemplars_refused`), as the C producer counts them:
   nothing while the metric or the bot is off. A closed bot counts nothing (the call then raises). */
static PyObject *core_count_refused(CoreObject *core, PyObject *args) {
    unsigned long index;
    int exemplar;
    if (!PyArg_ParseTuple(args, "kp", &index, &exemplar)) return NULL;
    if (core_ready(core) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (index >= core->bot->registry_capacity) Py_RETURN_NONE;
    if (exemplar) rs_bot_count_refused_exemplar(core->bot, (uint32_t)index);
    else count_clamped(core->bot, (uint32_t)index);
    Py_RETURN_NONE;
}

/* retire(index): retires the series (rs_bot_retire: RETIRING A SERIES in ringside.h); registering it again revives it. */
static PyObject *core_retire(CoreObject *core, PyObject *arg) {
    unsigned long index = PyLong_AsUnsignedLong(arg);
    if (index == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    if (core_check_open(core) < 0) return NULL;
    if (index > UINT32_MAX) return PyErr_Format(RingValueError, "bot %U: retire: metric index %lu", core->name, index);
    rs_metric metric;
    memset(&metric, 0, sizeof metric);
    metric.index = (uint32_t)index;
    rs_error error;
    if (rs_bot_retire(core->bot, metric, &error) < 0) return raise_rs_error(&error);
    Py_RETURN_NONE;
}

static PyObject *core_close(CoreObject *core, PyObject *Py_UNUSED(ignored)) {
    if (core->bot != NULL) {
        rs_bot *bot = core->bot;
        core->bot = NULL;
        rs_bot_detach(bot);
    }
    Py_RETURN_NONE;
}

static PyObject *core_path(CoreObject *core, void *Py_UNUSED(closure)) {
    if (core_check_open(core) < 0) return NULL;
    const char *path = rs_bot_path(core->bot);
    if (path[0] == 0) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(path);
}

static PyObject *core_enabled(CoreObject *core, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(core->bot != NULL && rs_bot_is_recording(core->bot));
}

static PyObject *core_lanes_allocated(CoreObject *core, void *Py_UNUSED(closure)) {
    if (core_check_open(core) < 0) return NULL;
    return PyLong_FromUnsignedLong(core->bot->enabled ? rs_bot_lanes_allocated(core->bot) : 0);
}

static PyObject *core_metric_count(CoreObject *core, void *Py_UNUSED(closure)) {
    if (core_check_open(core) < 0) return NULL;
    return PyLong_FromUnsignedLong(rs_bot_metric_count(core->bot));
}

/* Sums a lane header field over the lanes this process mapped (relaxed: a statistic). */
static uint64_t core_sum_lanes(rs_bot *bot, size_t field_offset) {
    uint64_t total = 0;
    if (!bot->enabled) return 0;
    uint32_t lanes = rs_bot_lanes_allocated(bot);
    for (uint32_t lane = 0; lane < lanes && lane < bot->max_lanes; lane++) {
        if (bot->lanes[lane] == NULL) continue;
        total += __atomic_load_n((uint64_t *)((char *)bot->lanes[lane] + field_offset), __ATOMIC_RELAXED);
    }
    return total;
}

static PyObject *core_records_written(CoreObject *core, void *Py_UNUSED(closure)) {
    if (core_check_open(core) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(core_sum_lanes(core->bot, offsetof(rs_lane_header, write_cursor)));
}

static PyObject *core_records_dropped(CoreObject *core, void *Py_UNUSED(closure)) {
    if (core_check_open(core) < 0) return NULL;
    rs_bot *bot = core->bot;
    uint64_t dropped = core_sum_lanes(bot, offsetof(rs_lane_header, dropped_total));
    if (bot->enabled && bot->header != NULL) {
        /* records of threads that found no lane, in the metrics' shared cells */
        const rs_metric_cell *cells = (const rs_metric_cell *)((const char *)bot->header + bot->header->cells_offset);
        uint32_t count = rs_bot_metric_count(bot);
        for (uint32_t index = 0; index < count; index++) {
            const rs_registry_entry *entry = rs_bot_registry_entry(bot, index);
            if (entry != NULL && entry->kind != RS_KIND_COUNTER)
                dropped += __atomic_load_n(&cells[index].unlaned, __ATOMIC_RELAXED);
        }
    }
    return PyLong_FromUnsignedLongLong(dropped);
}

/* MARK: - Handle: one metric's hot path */

/* Counts the forks this process descends from (a pthread_atfork child handler adds one): a
   gauge handle whose value was set in an earlier generation, by an ancestor, starts from 0. */
static uint64_t process_generation = 1;

static void after_fork_in_child(void) { process_generation++; } /* async-signal-safe; the child has one thread */

typedef struct {
    PyObject_HEAD
    CoreObject *core;
    rs_metric metric;
    uint64_t scale;        /* nanoseconds per declared time unit, else 1 */
    double float_scale;    /* the same, as a double */
    int whole_only;        /* 1: a float must be a whole number (bytes, none) */
    int steps;             /* 1: a metric of steps (VALUES in ringside.h): `metric` holds its form and scale */
    int64_t multiplier;    /* a metric of steps: an int's steps per unit, 10^-scale, when whole (scale <= 0); else 0 */
    double gauge_value;    /* a gauge's value as this process last set it (inc and dec add to it) */
    uint64_t gauge_generation; /* the process_generation gauge_value was set in */
    PyObject *convert;     /* value -> stored value, or raises (ringside/_values.py) */
    PyObject *encode_exemplar; /* a histogram's: exemplar -> its bytes, or raises (ringside/_exemplars.py); else None */
} HandleObject;

static PyTypeObject HandleType;

/* 10^n as ringside_producer.c's rsp_power_of_ten computes a metric's steps_per_unit: exact for a
   whole power (n from 0 to 22), the nearest double to a fraction's. */
static double power_of_ten(int n) {
    double power = 1;
    for (int i = 0; i < (n < 0 ? -n : n); i++) power *= 10;
    return n < 0 ? 1 / power : power;
}

/* handle(index, kind, scale, whole_only, convert, encode_exemplar, steps: None or (form, scale) = None) */
static PyObject *core_handle(CoreObject *core, PyObject *args) {
    unsigned long index;
    int kind, whole_only, form = 0, steps_scale = 0;
    unsigned long long scale;
    PyObject *convert, *encode_exemplar, *steps = Py_None;
    if (!PyArg_ParseTuple(args, "kiKpOO|O", &index, &kind, &scale, &whole_only, &convert, &encode_exemplar, &steps)) return NULL;
    if (core_check_open(core) < 0) return NULL;
    if (steps != Py_None && !PyArg_ParseTuple(steps, "ii", &form, &steps_scale)) return NULL;
    if (scale == 0 || !PyCallable_Check(convert) || (encode_exemplar != Py_None && !PyCallable_Check(encode_exemplar))
        || steps_scale < RS_SCALE_MIN || steps_scale > RS_SCALE_MAX || form < 0 || form > RS_FORM_SIGNED
        || (form == RS_FORM_SIGNED && kind != RS_KIND_HISTOGRAM))
        return PyErr_Format(PyExc_ValueError, "bad handle arguments");
    HandleObject *handle = PyObject_New(HandleObject, &HandleType);
    if (handle == NULL) return NULL;
    Py_INCREF(core);
    handle->core = core;
    handle->metric.index = (uint32_t)index;
    handle->metric.kind = (uint8_t)kind;
    handle->metric.sampled = 0;
    handle->metric.reserved = 0;
    handle->metric.scale = 0;
    handle->metric.reserved2 = 0;
    handle->metric.steps_per_unit = 1.0;
    handle->metric.ns_per_unit = 1; /* a time histogram stores nanoseconds */
    const rs_registry_entry *entry = rs_bot_registry_entry(core->bot, (uint32_t)index);
    if (entry != NULL) handle->metric.sampled = entry->sample_every > 1;
    handle->scale = scale;
    handle->float_scale = (double)scale;
    handle->whole_only = whole_only;
    handle->steps = steps != Py_None && kind != RS_KIND_GAUGE;
    handle->multiplier = 0;
    if (handle->steps) { /* as rs_bot_register_values fills an rs_metric */
        if (form == RS_FORM_SIGNED) handle->metric.kind = (uint8_t)RS_METRIC_SIGNED_HISTOGRAM;
        handle->metric.scale = (int8_t)steps_scale;
        handle->metric.steps_per_unit = power_of_ten(-steps_scale);
        if (steps_scale <= 0) handle->multiplier = (int64_t)handle->metric.steps_per_unit; /* 10^0 to 10^18: exact */
    }
    handle->gauge_value = 0.0;
    handle->gauge_generation = process_generation;
    Py_INCREF(convert);
    handle->convert = convert;
    Py_INCREF(encode_exemplar);
    handle->encode_exemplar = encode_exemplar;
    return (PyObject *)handle;
}

static void handle_dealloc(HandleObject *handle) {
    Py_XDECREF(handle->core);
    Py_XDECREF(handle->convert);
    Py_XDECREF(handle->encode_exemplar);
    PyObject_Free(handle);
}

/* MARK: - Lanes and thread names */

/* A thread's first record through the bot (cold): claims its lane, as the record would, and names
   the lane after the Python thread. Runs Python code: the caller checks the bot is open after it.
   A name that cannot be had (a failure inside threading) is reported as unraisable, and the lane
   keeps the kernel's name: it is a label, and the record goes on. */
static __attribute__((noinline, cold)) void core_claim_lane(CoreObject *core) {
    (void)rs_bot_producer(core->bot); /* the claim: a lane, none (laneless), or a disabled bot's */
    if (!core->bot->enabled) return;  /* nothing to name */
    PyObject *name = PyObject_CallObject(current_thread_name, NULL);
    if (name == NULL || !PyBytes_Check(name)) {
        if (name == NULL) PyErr_WriteUnraisable(current_thread_name);
        Py_XDECREF(name);
        return;
    }
    if (core->bot != NULL) /* the Python code above may have let another thread close it */
        (void)rs_bot_name_thread(core->bot, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name));
    Py_DECREF(name);
}

/* 0 when the bot is open and the calling thread has claimed (and named) its lane; else -1 with
   RingError set. The last thing a call does before it records. */
static inline int core_ready(CoreObject *core) {
    rs_bot *bot = core->bot;
    if (__builtin_expect(bot == NULL, 0)) return core_check_open(core);
    if (__builtin_expect(rs_thread_lanes[bot->slot].generation == bot->generation, 1)) return 0;
    core_claim_lane(core);
    return core_check_open(core);
}

/* A value the fast path did not take, through `convert`: 0 and *out; CONVERTED_NOTHING for a bad
   value the converter counted and records nothing for (a NaN, not a number: BAD VALUES in
   ringside/__init__.py); or -1 with the exception set (a strict bot's converter raises). */
enum { CONVERTED_NOTHING = 1 };
static int handle_convert(HandleObject *handle, PyObject *value, uint64_t *whole, double *real) {
    PyObject *converted = PyObject_CallFunctionObjArgs(handle->convert, value, NULL);
    if (converted == NULL) return -1;
    if (converted == Py_None) {
        Py_DECREF(converted);
        return CONVERTED_NOTHING;
    }
    /* Into `whole` (an int the converter returned) or else `real` (a float). */
    if (whole != NULL) *whole = PyLong_AsUnsignedLongLong(converted);
    else *real = PyFloat_AsDouble(converted);
    Py_DECREF(converted);
    return PyErr_Occurred() ? -1 : 0;
}

static int handle_convert_u64(HandleObject *handle, PyObject *value, uint64_t *out) {
    return handle_convert(handle, value, out, NULL);
}

static int handle_convert_double(HandleObject *handle, PyObject *value, double *out) {
    return handle_convert(handle, value, NULL, out);
}

/* A histogram's observation as stored: whole nanoseconds (time units) or whole numbers. */
static int handle_observation(HandleObject *handle, PyObject *value, uint64_t *out) {
    if (PyFloat_CheckExact(value)) {
        double product = PyFloat_AS_DOUBLE(value) * handle->float_scale;
        /* NaN fails both comparisons; 2^64 is the first double out of range, and every double
           below it rounds to one below it (doubles that large are whole numbers). */
        if (product >= 0.0 && product < 18446744073709551616.0) {
            double rounded = nearbyint(product); /* to the nearest, ties to even: Python's round() */
            if (!handle->whole_only || rounded == product) {
                *out = (uint64_t)rounded;
                return 0;
            }
        }
    } else if (PyLong_CheckExact(value)) {
        int overflow;
        long long whole = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow && whole >= 0 && !__builtin_mul_overflow((uint64_t)whole, handle->scale, out)) return 0;
        if (whole == -1 && PyErr_Occurred()) PyErr_Clear();
    }
    return handle_convert_u64(handle, value, out);
}

/* A str's UTF-8 bytes: an ASCII string's own (no call), else CPython's cached copy; NULL for a
   lone surrogate, with no exception left set (the encoder names it). */
static const char *exemplar_text(PyObject *text, Py_ssize_t *length) {
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *length = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    const char *bytes = PyUnicode_AsUTF8AndSize(text, length);
    if (bytes == NULL) PyErr_Clear();
    return bytes;
}

/* Appends "key=value" (after a newline if `used` > 0) to `out`, checking as it copies the rules
   rs_exemplar_check holds the joined bytes to: the key a name, the value without newline or NUL,
   RS_EXEMPLAR_MAX bytes in all. A dict's keys are distinct strings, so their bytes are too: the
   one rule left to the joined bytes holds by construction. The new length, or 0 if refused. */
static size_t exemplar_append(char *out, size_t used, const char *key, size_t key_length, const char *value,
                              size_t value_length) {
    size_t needed = used + (used > 0) + key_length + 1 + value_length;
    if (key_length == 0 || needed > RS_EXEMPLAR_MAX) return 0;
    if (used > 0) out[used++] = '\n';
    for (size_t at = 0; at < key_length; at++) {
        unsigned char c = (unsigned char)key[at];
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!letter && !(at > 0 && c >= '0' && c <= '9')) return 0;
        out[used++] = (char)c;
    }
    out[used++] = '=';
    for (size_t at = 0; at < value_length; at++) {
        char c = value[at];
        if (c == '\n' || c == 0) return 0;
        out[used++] = c;
    }
    return used;
}

/* An exemplar's bytes, checked: a dict of str to str is encoded and checked here in one pass
   (tests/test_exemplars.py holds it to rs_exemplar_check on fuzzed dicts); anything else, or
   anything refused, goes to the handle's encoder, which counts one it refuses and returns None (a
   strict bot's raises, naming the problem), and whose bytes rs_exemplar_check has the last word on.
   0 and `length` bytes in `out` (RS_EXEMPLAR_MAX); CONVERTED_NOTHING for an exemplar refused and
   counted (the value is recorded without it); or -1 with the exception set. */
static int handle_exemplar(HandleObject *handle, PyObject *exemplar, char *out, size_t *length) {
    size_t used = 0;
    int taken = PyDict_CheckExact(exemplar) && PyDict_GET_SIZE(exemplar) > 0;
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (taken && PyDict_Next(exemplar, &at, &key, &value)) {
        Py_ssize_t key_length, value_length;
        const char *k = PyUnicode_CheckExact(key) ? exemplar_text(key, &key_length) : NULL;
        const char *v = k != NULL && PyUnicode_CheckExact(value) ? exemplar_text(value, &value_length) : NULL;
        used = v == NULL ? 0 : exemplar_append(out, used, k, (size_t)key_length, v, (size_t)value_length);
        taken = used > 0;
    }
    if (taken) {
        *length = used;
        return 0;
    }
    if (handle->encode_exemplar == Py_None) {
        PyErr_SetString(PyExc_TypeError, "only a histogram records an exemplar");
        return -1;
    }
    PyObject *encoded = PyObject_CallFunctionObjArgs(handle->encode_exemplar, exemplar, NULL);
    if (encoded == NULL) return -1;
    if (encoded == Py_None) {
        Py_DECREF(encoded);
        return CONVERTED_NOTHING;
    }
    rs_error error;
    error.message[0] = 0;
    if (!PyBytes_Check(encoded)) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_TypeError, "the exemplar encoder returned no bytes");
        return -1;
    }
    size_t size = (size_t)PyBytes_GET_SIZE(encoded);
    if (rs_exemplar_check(PyBytes_AS_STRING(encoded), size, &error) != 0) { /* the encoder let it through: C has the last word */
        Py_DECREF(encoded);
        if (core_ready(handle->core) < 0) return -1;
        rs_bot_count_refused_exemplar(handle->core->bot, handle->metric.index);
        return CONVERTED_NOTHING;
    }
    memcpy(out, PyBytes_AS_STRING(encoded), size);
    *length = size;
    Py_DECREF(encoded);
    return 0;
}

/* observe(value) and stop(token) take an exemplar too, positional or by keyword: `*exemplar` is
   NULL (none given), None or it. 0, or -1 with TypeError set. */
static int parse_exemplar(const char *call, PyObject *const *args, Py_ssize_t count, PyObject *keywords,
                          PyObject **exemplar) {
    Py_ssize_t named = keywords != NULL ? PyTuple_GET_SIZE(keywords) : 0;
    if (count < 1 || count > 2 || named > 1 || (named == 1 && count == 2)) {
        PyErr_Format(PyExc_TypeError, "%s() takes 1 argument and an optional exemplar (%zd given)", call, count + named);
        return -1;
    }
    PyObject *name = named == 1 ? PyTuple_GET_ITEM(keywords, 0) : NULL;
    if (name != NULL && name != exemplar_keyword
        && (!PyUnicode_CheckExact(name) || PyUnicode_CompareWithASCIIString(name, "exemplar") != 0)) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", call, name);
        return -1;
    }
    *exemplar = count == 2 || named == 1 ? args[1] : NULL;
    return 0;
}

/* MARK: - Values of steps (VALUES in ringside.h) */

enum { VALUE_ERROR = -1, VALUE_STEPS = 0, VALUE_UNITS = 1, VALUE_NOTHING = 2 };

/* A value of a metric of steps, read: VALUE_STEPS, *steps its exact steps in the metric's range
   (an int64's bits for a signed histogram); VALUE_UNITS, *units a double in the metric's unit for
   the C producer to round, clamp and count; or VALUE_ERROR with the exception set. An exact int
   whose steps fit is taken here; anything else goes to the converter (ringside/_values.py), which
   returns the exact steps of an integral value, an infinity of its sign for one out of range, or
   a float; or None for one that is not a number, counted (VALUE_NOTHING); a strict bot's raises
   naming the value. */
static int steps_value(HandleObject *handle, PyObject *value, uint64_t *steps, double *units) {
    int is_signed = handle->metric.kind == RS_METRIC_SIGNED_HISTOGRAM;
    if (PyFloat_CheckExact(value)) {
        *units = PyFloat_AS_DOUBLE(value);
        return VALUE_UNITS;
    }
    if (PyLong_CheckExact(value) && handle->multiplier > 0) {
        int overflow;
        long long whole = PyLong_AsLongLongAndOverflow(value, &overflow);
        long long product;
        if (!overflow && is_signed && !__builtin_mul_overflow(whole, (long long)handle->multiplier, &product)
            && product != INT64_MIN) {
            *steps = (uint64_t)product;
            return VALUE_STEPS;
        }
        if (!overflow && !is_signed && whole >= 0 && !__builtin_mul_overflow((uint64_t)whole, (uint64_t)handle->multiplier, steps))
            return VALUE_STEPS;
        if (whole == -1 && PyErr_Occurred()) PyErr_Clear();
    }
    PyObject *converted = PyObject_CallFunctionObjArgs(handle->convert, value, NULL);
    if (converted == NULL) return VALUE_ERROR;
    int read = VALUE_STEPS;
    if (converted == Py_None) {
        read = VALUE_NOTHING;
    } else if (PyFloat_Check(converted)) {
        *units = PyFloat_AS_DOUBLE(converted);
        read = VALUE_UNITS;
    } else if (is_signed) {
        long long whole = PyLong_AsLongLong(converted);
        *steps = (uint64_t)whole;
        if (whole == -1 && PyErr_Occurred()) read = VALUE_ERROR;
    } else {
        *steps = PyLong_AsUnsignedLongLong(converted);
        if (*steps == (uint64_t)-1 && PyErr_Occurred()) read = VALUE_ERROR;
    }
    Py_DECREF(converted);
    return read;
}

/* Counts a value a metric could not hold in its cell's `clamped`, as ringside_producer.c's
   rsp_count_clamped does (an atomic add: any thread, and the C producer's, may add). */
static void count_clamped(rs_bot *bot, uint32_t index) {
    /* Off (CONTROL in ringside.h): the call counts nothing, a clamp neither, as rsp_count_clamped. */
    if (rs_producer_control(rs_bot_producer(bot), index) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) return;
    if (!bot->enabled || bot->header == NULL || index >= bot->registry_capacity) return;
    rs_metric_cell *cells = (rs_metric_cell *)((char *)bot->header + bot->header->cells_offset);
    __atomic_fetch_add(&cells[index].clamped, 1, __ATOMIC_RELAXED);
}

/* A value in the unit as a histogram of steps stores it, as rs_bot_record_value (and its cold
   part, rs_bot_record_unrepresentable) computes it: rounded to the nearest step, ties to even, in
   offset binary for a signed one; one it cannot hold clamped to its nearest end and counted. 0 for
   a NaN (counted, nothing to record), else 1 and *stored. */
static int stored_value(rs_bot *bot, rs_metric metric, double units, uint64_t *stored) {
    double steps = units * metric.steps_per_unit;
    if (metric.kind == RS_METRIC_SIGNED_HISTOGRAM) {
        if (steps > -9223372036854775808.0 && steps < 9223372036854775808.0) {
            *stored = (uint64_t)(int64_t)rint(steps) ^ RS_OFFSET_BINARY_BIAS;
            return 1;
        }
        count_clamped(bot, metric.index);
        *stored = (uint64_t)(units < 0 ? -INT64_MAX : INT64_MAX) ^ RS_OFFSET_BINARY_BIAS;
        return units == units;
    }
    if (steps >= 0 && steps < 18446744073709551616.0) {
        *stored = (uint64_t)rint(steps);
        return 1;
    }
    count_clamped(bot, metric.index);
    *stored = units < 0 ? 0 : UINT64_MAX;
    return units == units;
}

/* rs_bot_record_checked_exemplar for a value of an unsigned histogram of steps, as stored: under
   the operator's control as that function is (CONTROL in ringside.h: off, nothing; else without
   its exemplar), else sampled, then written with its exemplar's records. */
static int record_stored_exemplar(rs_bot *bot, rs_metric metric, uint64_t stored, const char *exemplar, size_t length) {
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, metric.index);
    if (__builtin_expect(control != 0, 0)) return rs_bot_record_controlled(bot, metric.index, stored, 0, rs_clock_precise_ns(), control);
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    if (p->records == NULL) return rs_producer_lose(p, metric.index, RS_KIND_HISTOGRAM, stored); /* no clock read */
    /* The precise clock: an exemplar's time must never precede its call (CLOCKS in ringside.h). */
    return rs_producer_write_exemplar(p, metric.index, 0, stored, rs_clock_precise_ns(), exemplar, (uint32_t)length);
}

/* observe(value, exemplar=None) of a histogram of steps. */
static PyObject *steps_observe(HandleObject *handle, PyObject *value, PyObject *exemplar) {
    uint64_t steps = 0;
    double units = 0;
    int read = steps_value(handle, value, &steps, &units);
    if (read == VALUE_ERROR) return NULL;
    if (read == VALUE_NOTHING) Py_RETURN_FALSE;
    rs_metric metric = handle->metric;
    int is_signed = metric.kind == RS_METRIC_SIGNED_HISTOGRAM;
    char bytes[RS_EXEMPLAR_MAX];
    size_t length = 0;
    int refused = 0;
    if (exemplar != NULL && exemplar != Py_None) {
        if (is_signed) {
            /* A signed histogram's values carry no exemplars: its refuser counts it and returns None
               (a strict bot's raises, naming the metric); the value is recorded without it. */
            PyObject *answer = PyObject_CallFunctionObjArgs(handle->encode_exemplar, exemplar, NULL);
            if (answer == NULL) return NULL;
            Py_DECREF(answer);
            refused = 1;
        } else {
            refused = handle_exemplar(handle, exemplar, bytes, &length);
            if (refused < 0) return NULL;
        }
    }
    if (exemplar == NULL || exemplar == Py_None || refused) {
        if (core_ready(handle->core) < 0) return NULL;
        rs_bot *bot = handle->core->bot;
        if (read == VALUE_UNITS) return PyBool_FromLong(rs_bot_record_value(bot, metric, units));
        return PyBool_FromLong(is_signed ? rs_bot_record_signed(bot, metric, (int64_t)steps) : rs_bot_record(bot, metric, steps));
    }
    if (core_ready(handle->core) < 0) return NULL;
    rs_bot *bot = handle->core->bot;
    uint64_t stored = steps;
    if (read == VALUE_UNITS && !stored_value(bot, metric, units, &stored)) Py_RETURN_FALSE; /* a NaN */
    return PyBool_FromLong(record_stored_exemplar(bot, metric, stored, bytes, length));
}

/* inc(amount=1) of a counter of steps. */
static PyObject *steps_increment(HandleObject *handle, PyObject *const *args, Py_ssize_t count) {
    if (count > 1) return PyErr_Format(PyExc_TypeError, "inc() takes at most 1 argument (%zd given)", count);
    uint64_t steps = 0;
    double units = 0;
    int read;
    if (count == 0) {
        PyObject *one = PyLong_FromLong(1);
        if (one == NULL) return NULL;
        read = steps_value(handle, one, &steps, &units);
        Py_DECREF(one);
    } else {
        read = steps_value(handle, args[0], &steps, &units);
    }
    if (read == VALUE_ERROR) return NULL;
    if (read == VALUE_NOTHING) Py_RETURN_NONE;
    if (core_ready(handle->core) < 0) return NULL;
    if (read == VALUE_UNITS) rs_bot_count_value(handle->core->bot, handle->metric, units);
    else rs_bot_count(handle->core->bot, handle->metric, steps);
    Py_RETURN_NONE;
}

/* rs_bot_record_span with a checked exemplar: the span from `start` to now, flagged as a span and
   stamped with its end, as rs_producer_record_span writes it, with the exemplar's records; under the
   operator's control as rs_bot_record_span_slow records it (CONTROL in ringside.h: off, nothing;
   else without its exemplar). */
static int record_span_exemplar(rs_bot *bot, rs_metric metric, uint64_t start, const char *exemplar, size_t length) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    rs_span_time time = rs_span_clock_end(start);
    uint64_t value = metric.ns_per_unit > 1 ? time.elapsed_ns / metric.ns_per_unit : time.elapsed_ns;
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, metric.index);
    if (__builtin_expect(control != 0, 0)) return rs_bot_record_controlled(bot, metric.index, value, RS_FLAG_SPAN, time.end_ns, control);
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    return rs_producer_write_exemplar(p, metric.index, RS_FLAG_SPAN, value, time.end_ns, exemplar, (uint32_t)length);
}

enum { RECORD_VALUE, RECORD_SPAN };

/* Records `value` (a stored value; with RECORD_SPAN a span's start token, as start() returned it)
   with `exemplar` when one is given and accepted; without it when none is given or it is refused
   (counted, or raised by a strict bot: NULL). */
static PyObject *record_with_exemplar(HandleObject *handle, PyObject *exemplar, int what, uint64_t value) {
    char bytes[RS_EXEMPLAR_MAX];
    size_t length;
    int refused = exemplar == NULL || exemplar == Py_None ? CONVERTED_NOTHING : handle_exemplar(handle, exemplar, bytes, &length);
    if (refused < 0) return NULL;
    if (core_ready(handle->core) < 0) return NULL;
    rs_bot *bot = handle->core->bot;
    if (refused == CONVERTED_NOTHING) { /* no exemplar, or one refused and counted */
        return PyBool_FromLong(what == RECORD_SPAN ? rs_bot_record_span(bot, handle->metric, value)
                                                   : rs_bot_record(bot, handle->metric, value));
    }
    /* Checked above (handle_exemplar): not again. */
    if (what == RECORD_SPAN) return PyBool_FromLong(record_span_exemplar(bot, handle->metric, value, bytes, length));
    return PyBool_FromLong(rs_bot_record_checked_exemplar(bot, handle->metric, value, bytes, length));
}

/* observe(value, exemplar=None) */
static PyObject *handle_observe(HandleObject *handle, PyObject *const *args, Py_ssize_t count, PyObject *keywords) {
    PyObject *exemplar = NULL;
    if (__builtin_expect(count != 1 || keywords != NULL, 0) && parse_exemplar("observe", args, count, keywords, &exemplar) < 0)
        return NULL;
    if (handle->steps) return steps_observe(handle, args[0], exemplar);
    uint64_t stored;
    int converted = handle_observation(handle, args[0], &stored);
    if (converted < 0) return NULL;
    if (converted == CONVERTED_NOTHING) Py_RETURN_FALSE;
    return record_with_exemplar(handle, exemplar, RECORD_VALUE, stored);
}

/* start(): a span clock reading (rs_span_clock_start: the TSC with RS_SPAN_TSC_BIT, or
   CLOCK_MONOTONIC ns), the token stop() takes. */
static PyObject *handle_start(HandleObject *Py_UNUSED(handle), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromUnsignedLongLong(rs_span_clock_start());
}

/* stop(token, exemplar=None) */
static PyObject *handle_stop(HandleObject *handle, PyObject *const *args, Py_ssize_t count, PyObject *keywords) {
    PyObject *exemplar = NULL;
    if (__builtin_expect(count != 1 || keywords != NULL, 0) && parse_exemplar("stop", args, count, keywords, &exemplar) < 0)
        return NULL;
    PyObject *token = args[0];
    uint64_t start = PyLong_AsUnsignedLongLong(token);
    if (start == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "stop() takes the token start() returned, not %R", token);
    }
    return record_with_exemplar(handle, exemplar, RECORD_SPAN, start);
}

/* A counter's increment, or a gauge's amount: the one optional argument (default 1). */
static int handle_increment(HandleObject *handle, PyObject *const *args, Py_ssize_t count, uint64_t *out) {
    if (count == 0) {
        *out = 1;
        return 0;
    }
    if (count > 1) {
        PyErr_Format(PyExc_TypeError, "inc() takes at most 1 argument (%zd given)", count);
        return -1;
    }
    PyObject *value = args[0];
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long whole = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow && whole >= 0) {
            *out = (uint64_t)whole;
            return 0;
        }
        if (whole == -1 && PyErr_Occurred()) PyErr_Clear();
    }
    return handle_convert_u64(handle, value, out);
}

/* A gauge's inc() or dec() (`call`): adds the one optional amount (default 1) to the value this
   process last set, or subtracts it, and sets the gauge to the result. */
static PyObject *gauge_add(HandleObject *handle, PyObject *const *args, Py_ssize_t count, const char *call, int subtract) {
    double amount = 1.0;
    if (count > 1) return PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument (%zd given)", call, count);
    if (count == 1) {
        if (PyFloat_CheckExact(args[0])) amount = PyFloat_AS_DOUBLE(args[0]);
        else {
            int converted = handle_convert_double(handle, args[0], &amount);
            if (converted < 0) return NULL;
            if (converted == CONVERTED_NOTHING) Py_RETURN_NONE;
        }
    }
    if (core_ready(handle->core) < 0) return NULL;
    /* Under the GIL: one thread at a time. */
    if (handle->gauge_generation != process_generation) { /* set by the parent of this forked child */
        handle->gauge_value = 0.0;
        handle->gauge_generation = process_generation;
    }
    if (subtract) handle->gauge_value -= amount;
    else handle->gauge_value += amount;
    rs_bot_set(handle->core->bot, handle->metric, handle->gauge_value);
    Py_RETURN_NONE;
}

static PyObject *handle_inc(HandleObject *handle, PyObject *const *args, Py_ssize_t count) {
    if (handle->metric.kind == RS_KIND_GAUGE) return gauge_add(handle, args, count, "inc", 0);
    if (handle->steps) return steps_increment(handle, args, count);
    uint64_t increment;
    int converted = handle_increment(handle, args, count, &increment);
    if (converted < 0) return NULL;
    if (converted == CONVERTED_NOTHING) Py_RETURN_NONE;
    if (core_ready(handle->core) < 0) return NULL;
    rs_bot_count(handle->core->bot, handle->metric, increment);
    Py_RETURN_NONE;
}

static PyObject *handle_dec(HandleObject *handle, PyObject *const *args, Py_ssize_t count) {
    return gauge_add(handle, args, count, "dec", 1);
}

static PyObject *handle_set(HandleObject *handle, PyObject *value) {
    double number;
    if (PyFloat_CheckExact(value)) number = PyFloat_AS_DOUBLE(value);
    else {
        int converted = handle_convert_double(handle, value, &number);
        if (converted < 0) return NULL;
        if (converted == CONVERTED_NOTHING) Py_RETURN_FALSE;
    }
    if (core_ready(handle->core) < 0) return NULL;
    handle->gauge_value = number;
    handle->gauge_generation = process_generation;
    return PyBool_FromLong(rs_bot_set(handle->core->bot, handle->metric, number));
}

/* exemplar_check(data: bytes) -> None, or why rs_exemplar_check refuses the bytes: for the tests,
   which hold ringside/_exemplars.py's port of it to the C producer's rules. */
static PyObject *ringside_exemplar_check(PyObject *Py_UNUSED(module), PyObject *data) {
    if (!PyBytes_Check(data)) return PyErr_Format(PyExc_TypeError, "exemplar_check() takes bytes, not %R", data);
    rs_error error;
    error.message[0] = 0;
    if (rs_exemplar_check(PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data), &error) == 0) Py_RETURN_NONE;
    return PyUnicode_FromString(error.message);
}

/* span_clock(): rs_span_clock_describe's sentence (the clock is chosen at the first attach). */
static PyObject *ringside_span_clock(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    char text[512];
    rs_span_clock_describe(text, sizeof text);
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

/* select_span_clock(name): rs_span_clock_select, for the benchmark and the tests. */
static PyObject *ringside_select_span_clock(PyObject *Py_UNUSED(module), PyObject *name) {
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (text == NULL) return PyErr_Format(PyExc_TypeError, "select_span_clock() takes \"tsc\" or \"monotonic\", not %R", name);
    uint32_t clock = strcmp(text, "tsc") == 0 ? RS_SPAN_CLOCK_TSC : strcmp(text, "monotonic") == 0 ? RS_SPAN_CLOCK_MONOTONIC : 0;
    if (clock == 0) return PyErr_Format(PyExc_ValueError, "select_span_clock() takes \"tsc\" or \"monotonic\", not %R", name);
    return PyBool_FromLong(rs_span_clock_select(clock) == 0);
}

/* MARK: - Types and module */

static PyMethodDef core_methods[] = {
    {"register", (PyCFunction)core_register, METH_VARARGS, "register(name, kind, unit, labels, help, sample_every, merge, form=0, scale=0) -> index"},
    {"handle", (PyCFunction)core_handle, METH_VARARGS, "handle(index, kind, scale, whole_only, convert, encode_exemplar, steps=None) -> Handle"},
    {"count_refused", (PyCFunction)core_count_refused, METH_VARARGS,
     "count_refused(index, exemplar) counts a value metric index could not take, or an exemplar refused"},
    {"retire", (PyCFunction)core_retire, METH_O, "retire(index): the series is retired until registered again"},
    {"close", (PyCFunction)core_close, METH_NOARGS, "Detaches the bot; its records stay for the collector."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_getset[] = {
    {"path", (getter)core_path, NULL,
     "the file this process writes (the bot's, or its own as a worker), or None: disabled, or a forked child before its first record",
     NULL},
    {"enabled", (getter)core_enabled, NULL,
     "False when disabled or closed, and in a forked child until its first record makes it a worker", NULL},
    {"lanes_allocated", (getter)core_lanes_allocated, NULL, "lanes in the file", NULL},
    {"metric_count", (getter)core_metric_count, NULL, "registry entries published", NULL},
    {"records_written", (getter)core_records_written, NULL, "records published, over the lanes", NULL},
    {"records_dropped", (getter)core_records_dropped, NULL, "records lost: full lanes, threads without one", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringside._ringside.Core",
    .tp_basicsize = sizeof(CoreObject),
    .tp_dealloc = (destructor)core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An attached bot (made by attach()).",
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

static PyMethodDef handle_methods[] = {
    {"observe", (PyCFunction)(void (*)(void))handle_observe, METH_FASTCALL | METH_KEYWORDS,
     "observe(value, exemplar=None): records an observation of a histogram, with an exemplar if given."},
    {"start", (PyCFunction)handle_start, METH_NOARGS, "The span clock now (a token), for stop()."},
    {"stop", (PyCFunction)(void (*)(void))handle_stop, METH_FASTCALL | METH_KEYWORDS,
     "stop(token, exemplar=None): records the time since start() as a span, with an exemplar if given."},
    {"inc", (PyCFunction)(void (*)(void))handle_inc, METH_FASTCALL, "Adds to a counter or a gauge."},
    {"dec", (PyCFunction)(void (*)(void))handle_dec, METH_FASTCALL, "Subtracts from a gauge."},
    {"set", (PyCFunction)handle_set, METH_O, "Sets a gauge."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringside._ringside.Handle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One registered metric's calls (made by Core.handle()).",
    .tp_methods = handle_methods,
};

static PyMethodDef module_methods[] = {
    {"attach", ringside_attach, METH_VARARGS,
     "attach(name, directory, lane_capacity, max_metrics, max_lanes, mode, worker, max_workers, sample_above_percent) -> Core"},
    {"exemplar_check", ringside_exemplar_check, METH_O,
     "exemplar_check(data: bytes) -> None, or why rs_exemplar_check refuses it"},
    {"span_clock", ringside_span_clock, METH_NOARGS, "span_clock() -> which clock spans start on, and why"},
    {"select_span_clock", ringside_select_span_clock, METH_O,
     "select_span_clock(\"tsc\" | \"monotonic\") -> whether spans started from now on read it (rs_span_clock_select)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "ringside._ringside",
    .m_doc = "The C backend of ringside (over ringside_producer.h).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__ringside(void) {
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&HandleType) < 0) return NULL;
    static int registered_fork_handler;
    if (!registered_fork_handler) { /* once, should the module be initialised again */
        if (pthread_atfork(NULL, NULL, after_fork_in_child) != 0) return PyErr_NoMemory();
        registered_fork_handler = 1;
    }
    PyObject *errors = PyImport_ImportModule("ringside._errors");
    if (errors == NULL) return NULL;
    RingError = PyObject_GetAttrString(errors, "RingError");
    RingValueError = PyObject_GetAttrString(errors, "RingValueError");
    Py_DECREF(errors);
    if (RingError == NULL || RingValueError == NULL) return NULL;
    PyObject *threadname = PyImport_ImportModule("ringside._threadname");
    if (threadname == NULL) return NULL;
    current_thread_name = PyObject_GetAttrString(threadname, "current");
    Py_DECREF(threadname);
    if (current_thread_name == NULL) return NULL;
    exemplar_keyword = PyUnicode_InternFromString("exemplar");
    if (exemplar_keyword == NULL) return NULL;
    return PyModule_Create(&module_definition);
}
