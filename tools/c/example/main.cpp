// A first C++ bot on Ringside's producer API (tools/c/CMakeLists.txt builds it as Ringside::producer).
//
//   example BOT DIR COUNT
//
// Attaches bot BOT in DIR and registers three metrics:
//   0  example_latency  histogram, microseconds, {venue="XNAS"}
//   1  example_orders   counter
//   2  example_exposure gauge
// Two threads each record example_latency = 1, 2, ... COUNT and count example_orders += 1 as
// many times, then time a 1 ms sleep with ringside::Span (a span record in the same histogram,
// in microseconds). After joining them, the main thread sets example_exposure = COUNT * 2.5.
// Prints "wrote N values" and exits 0; on failure prints the error and exits 1 (2: usage).
#include "ringside_producer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: example BOT DIR COUNT\n");
        return 2;
    }
    const uint64_t count = std::strtoull(argv[3], nullptr, 10);

    rs_bot_options options = {};
    options.directory = argv[2];
    rs_error error;
    rs_bot *bot;
    if (rs_bot_attach(&bot, argv[1], &options, &error) < 0) {
        std::fprintf(stderr, "example: %s\n", error.message);
        return 1;
    }
    const char *labels[] = {"venue", "XNAS", nullptr};
    rs_metric latency, orders, exposure;
    if (rs_bot_register(bot, &latency, "example_latency", RS_KIND_HISTOGRAM, RS_UNIT_MICROSECONDS, labels,
                        "order round trip", 1, &error) < 0 ||
        rs_bot_register(bot, &orders, "example_orders", RS_KIND_COUNTER, RS_UNIT_NONE, nullptr, "", 1, &error) < 0 ||
        rs_bot_register(bot, &exposure, "example_exposure", RS_KIND_GAUGE, RS_UNIT_NONE, nullptr, "", 1, &error) < 0) {
        std::fprintf(stderr, "example: %s\n", error.message);
        rs_bot_detach(bot);
        return 1;
    }

    // Each thread records into a lane of its own: no lock, no allocation, no system call.
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; t++) {
        threads.emplace_back([&] {
            for (uint64_t i = 1; i <= count; i++) {
                rs_bot_record(bot, latency, i);
                rs_bot_count(bot, orders, 1);
            }
            ringside::Span span(bot, latency); // records the scope's duration when it ends
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
    }
    for (auto &thread : threads) thread.join();
    rs_bot_set(bot, exposure, double(count) * 2.5);

    rs_bot_detach(bot);
    std::printf("wrote %llu values\n", (unsigned long long)(2 * count));
    return 0;
}
