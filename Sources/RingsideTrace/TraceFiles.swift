/// The files a trace is written as, by `ringside-dump postmortem` and the collector's captures
/// alike: the Trace Event Format's JSON (what Perfetto's UI and chrome://tracing open),
/// Perfetto's protobuf (what a reader of Perfetto's `.proto` decodes), and the records'
/// HdrHistogram interval log of the same seconds.
package struct TraceFiles: Sendable {
    package let model: TraceModel
    /// Each file's name suffix (`.trace.json`, `.pftrace`, `.hlog`) and contents.
    package let files: [(suffix: String, bytes: [UInt8])]

    /// Builds the trace of `records`, read with `sources`; `program` names the writer in the
    /// interval log's header.
    package init(sources: [TraceSource], records: [TraceRecord], program: String) {
        let model = TraceBuilder.build(sources: sources, records: records)
        self.model = model
        let log = TraceHistogramLog.encode(
            sources: sources, records: records, originRealtimeNanos: model.originRealtimeNanos, program: program)
        files = [
            (".trace.json", Array(ChromeTraceJSON.encode(model).utf8)),
            (".pftrace", PerfettoTrace.encode(model)),
            (".hlog", Array(log.utf8)),
        ]
    }
}
