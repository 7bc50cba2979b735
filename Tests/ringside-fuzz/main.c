/* ringside-fuzz's entry point, in C because libFuzzer brings a main of its own.
 *
 * Built with `swift build --sanitize=fuzzer`, libFuzzer's main (a strong symbol) wins over this
 * weak one and fuzzes the target named by RINGSIDE_FUZZ_TARGET through LLVMFuzzerTestOneInput.
 * Built as usual (`swift build`, `swift test`), this main runs: it replays the given inputs
 * through a target (`fuzz_replay`, RingsideFuzzTargets' FuzzEntry.swift), as the regression
 * tests do. A Swift main cannot be weak, so this file is the whole executable's own code. */

int fuzz_replay(int argc, char **argv);

__attribute__((weak)) int main(int argc, char **argv) { return fuzz_replay(argc, argv); }
