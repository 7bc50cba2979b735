/*
 * c_loop.c: the C side of `cargo run --release --example bench`. Each function is a whole timed
 * loop of the C producer's hot path (ringside_producer.h), so the Rust bench calls across the FFI
 * once per loop, never per record. Built by build.rs with the repository's C producer.
 */
#define _GNU_SOURCE
#include "ringside_producer.h"

#include <stdio.h>
#include <string.h>

static rs_bot *bench_bot;
static rs_metric bench_latency, bench_orders, bench_level;
static rs_metric bench_slippage, bench_commission; /* a signed histogram of steps of 0.01, a counter of 1e-6 */
static rs_bot *bench_sampled_bot; /* its lane kept full by a consumer that reads gather cells */
static rs_metric bench_sampled_latency;
static char bench_message[1024];

/* Attaches bot `name` in `directory` with lanes of `lane_capacity` records, the other options
   their defaults: rs_bot_attach's result. */
static int attach(rs_bot **bot, const char *directory, const char *name, uint64_t lane_capacity, rs_error *error) {
    rs_bot_options options;
    memset(&options, 0, sizeof options);
    options.directory = directory;
    options.lane_capacity = lane_capacity;
    return rs_bot_attach(bot, name, &options, error);
}

/* Attaches the C bot `name` in `directory` with lanes of `lane_capacity` records and registers
   the same metrics as the Rust side. 0, or a negative code (rsbench_c_error says why). */
int rsbench_c_open(const char *directory, const char *name, uint64_t lane_capacity) {
    rs_error error;
    int rc = attach(&bench_bot, directory, name, lane_capacity, &error);
    if (rc == 0) rc = rs_bot_register(bench_bot, &bench_latency, "latency", RS_KIND_HISTOGRAM, RS_UNIT_NANOSECONDS, NULL, "", 1, &error);
    if (rc == 0) rc = rs_bot_register(bench_bot, &bench_orders, "orders", RS_KIND_COUNTER, RS_UNIT_NONE, NULL, "", 1, &error);
    if (rc == 0) rc = rs_bot_register(bench_bot, &bench_level, "level", RS_KIND_GAUGE, RS_UNIT_NONE, NULL, "", 1, &error);
    rs_values hundredths = {RS_FORM_SIGNED, -2}, micros = {RS_FORM_UNSIGNED, -6};
    if (rc == 0) {
        rc = rs_bot_register_values(bench_bot, &bench_slippage, "slippage_bps", RS_KIND_HISTOGRAM, RS_UNIT_NONE, hundredths,
                                    NULL, "", 1, &error);
    }
    if (rc == 0) {
        rc = rs_bot_register_values(bench_bot, &bench_commission, "commission_usd", RS_KIND_COUNTER, RS_UNIT_NONE, micros,
                                    NULL, "", 1, &error);
    }
    if (rc != 0) snprintf(bench_message, sizeof bench_message, "%s", error.message);
    return rc;
}

/* Attaches the C bot `name` of the sampled row, with lanes of `lane_capacity` records and its
   histogram: the bench declares in its file a consumer that reads gather cells and never drains,
   so that once full its lane gathers nearly every call (SAMPLING AND GATHERING in ringside.h). */
int rsbench_c_open_sampled(const char *directory, const char *name, uint64_t lane_capacity) {
    rs_error error;
    int rc = attach(&bench_sampled_bot, directory, name, lane_capacity, &error);
    if (rc == 0) {
        rc = rs_bot_register(bench_sampled_bot, &bench_sampled_latency, "latency", RS_KIND_HISTOGRAM, RS_UNIT_NANOSECONDS,
                             NULL, "", 1, &error);
    }
    if (rc != 0) snprintf(bench_message, sizeof bench_message, "%s", error.message);
    return rc;
}

const char *rsbench_c_error(void) { return bench_message; }

void rsbench_c_close(void) {
    rs_bot_detach(bench_bot);
    bench_bot = NULL;
    if (bench_sampled_bot != NULL) rs_bot_detach(bench_sampled_bot);
    bench_sampled_bot = NULL;
}

/* The body of a timed loop: n calls of `call` (i counts them from 0), then the elapsed
   CLOCK_MONOTONIC nanoseconds returned and the calls that wrote a record in *written. A macro, so
   that each loop calls its producer function directly, as a bot does. */
#define TIMED_LOOP(call)                                        \
    uint64_t w = 0;                                             \
    uint64_t start = rs_clock_precise_ns();                     \
    for (uint64_t i = 0; i < n; i++) w += (uint64_t)(call);     \
    uint64_t end = rs_clock_precise_ns();                       \
    *written = w;                                               \
    return end - start

/* n calls of rs_bot_record(v = 0, 1, ...): the elapsed CLOCK_MONOTONIC nanoseconds; *written
   counts the records written. */
uint64_t rsbench_c_record_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_record(bench_bot, bench_latency, i));
}

/* n spans, each started and recorded at once: two span clock reads (the TSC where it serves) and a record. */
uint64_t rsbench_c_span_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_record_span(bench_bot, bench_latency, rs_span_clock_start()));
}

/* The same spans on CLOCK_MONOTONIC: a start read with rs_clock_precise_ns ends on it too. */
uint64_t rsbench_c_span_monotonic_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_record_span(bench_bot, bench_latency, rs_clock_precise_ns()));
}

/* rs_span_clock_describe's sentence, for the bench's heading. */
const char *rsbench_c_span_clock(void) {
    static char text[512];
    rs_span_clock_describe(text, sizeof text);
    return text;
}

/* n calls of rs_bot_set(x = 0.0, 1.0, ...). */
uint64_t rsbench_c_set_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_set(bench_bot, bench_level, (double)i));
}

/* n calls of rs_bot_record_checked_exemplar(v = 0, 1, ...) with "order_id=A17" (12 bytes, checked
   once before the loop as a binding's exemplar type is): the value and one exemplar record each. */
uint64_t rsbench_c_exemplar_loop(uint64_t n, uint64_t *written) {
    static const char exemplar[] = "order_id=A17";
    if (rs_exemplar_check(exemplar, sizeof exemplar - 1, NULL) != 0) return 0;
    TIMED_LOOP(rs_bot_record_checked_exemplar(bench_bot, bench_latency, i, exemplar, sizeof exemplar - 1));
}

/* n calls of rs_bot_record(v = 0, 1, ...) on the sampled bot: in its full lane, nearly all gathered. */
uint64_t rsbench_c_sampled_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_record(bench_sampled_bot, bench_sampled_latency, i));
}

/* n calls of rs_bot_count(1). */
uint64_t rsbench_c_count_loop(uint64_t n) {
    uint64_t start = rs_clock_precise_ns();
    for (uint64_t i = 0; i < n; i++) rs_bot_count(bench_bot, bench_orders, 1);
    uint64_t end = rs_clock_precise_ns();
    return end - start;
}

/* n calls of rs_bot_record_value on the signed histogram of hundredths: v = i / 4 - 1000 (-1000.00,
   -999.75, ...: exact doubles, negative then positive). */
uint64_t rsbench_c_value_loop(uint64_t n, uint64_t *written) {
    TIMED_LOOP(rs_bot_record_value(bench_bot, bench_slippage, (double)i * 0.25 - 1000.0));
}

/* n calls of rs_bot_record_signed on the same histogram: steps i - n/2. */
uint64_t rsbench_c_signed_loop(uint64_t n, uint64_t *written) {
    int64_t half = (int64_t)(n / 2);
    TIMED_LOOP(rs_bot_record_signed(bench_bot, bench_slippage, (int64_t)i - half));
}

/* n calls of rs_bot_count_value(0.37) on the counter of micro-dollars. */
uint64_t rsbench_c_count_value_loop(uint64_t n) {
    uint64_t start = rs_clock_precise_ns();
    for (uint64_t i = 0; i < n; i++) rs_bot_count_value(bench_bot, bench_commission, 0.37);
    uint64_t end = rs_clock_precise_ns();
    return end - start;
}
