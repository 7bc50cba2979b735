/// The capture timeline the collector serves at `/captures/view?file=NAME.trace.json`: HTML, CSS
/// and JavaScript written here (CaptureTimeline.html, embedded in the binary at build time), with
/// no external assets, so it works offline. It fetches the capture's Chrome trace from
/// `/api/captures/NAME` and draws it: a track per process, a row per thread with its slices,
/// counters as step lines; a slice's arguments (its value, its exemplar's pairs) on a click.
package enum CaptureTimeline {
    package static let contentType = "text/html; charset=utf-8"
    package static let bytes: [UInt8] = Array(PackageResources.CaptureTimeline_html)
}
