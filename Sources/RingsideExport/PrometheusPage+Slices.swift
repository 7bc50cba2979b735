// A page's text written in slices: what every slice reads (`SlicePlan`) and what writes one
// (`SliceWriter`), on the threads of a page written whole, or one slice at a time as a page is sent.

import RingsideSnapshot

/// What writing a page's families in slices takes (`PrometheusPage.slicePlan`): read by every
/// slice, written by none.
struct SlicePlan: @unchecked Sendable {
    // @unchecked: nothing here is written once the plan is made (`labels` is a buffer only read).
    let steps: [PrometheusPage.Step]
    let slices: [Range<Int>]
    /// About how many lines each step writes, and the bytes reserved a line.
    let lines: [Int]
    let bytesPerLine: Int
    /// Slices written at once.
    let threads: Int
    let names: [PrometheusExporter.FamilyNames]
    let shared: PrometheusExporter.SharedLabels
    /// Read in place (`withSeries`): copying a series (its strings and arrays) costs more than its lines.
    let series: SeriesList
    let labels: SeriesLabels
}

/// Writes slices of a page's steps, one slice per thread.
struct SliceWriter: @unchecked Sendable {
    // @unchecked: while the threads run, the plan is only read; each thread writes its own
    // slice's buffer.
    let plan: SlicePlan
    /// A batch's buffers: slice `n` is written into `buffers[n % buffers.count]`.
    let buffers: [TextBuffer]
    /// OpenMetrics carries exemplars; Prometheus's text format has no place for them.
    let openMetrics: Bool

    init(_ plan: SlicePlan, buffers: [TextBuffer], openMetrics: Bool) {
        self.plan = plan
        self.buffers = buffers
        self.openMetrics = openMetrics
    }

    /// Writes slice `slice` into its buffer, emptied first, and returns the buffer.
    func write(slice: Int) -> TextBuffer {
        let page = buffers[slice % buffers.count]
        page.removeAll()
        page.reserveCapacity(plan.lines[plan.slices[slice]].reduce(0, +) * plan.bytesPerLine)
        plan.labels.text.withBytes { labelText in
            for step in plan.steps[plan.slices[slice]] {
                switch step {
                case let .text(text):
                    page.append(bytes: text)
                case let .series(group, part, position):
                    plan.series.withSeries(at: position) { one in
                        SeriesLines(page: page, names: plan.names[group], shared: plan.shared, openMetrics: openMetrics)
                            .write(part, of: one, labels: UnsafeBufferPointer(rebasing: labelText[plan.labels.ranges[position]]))
                    }
                case let .perMetric(family, positions):
                    for position in positions {
                        plan.series.withSeries(at: position) { one in
                            guard let value = family.value(of: one.pointee) else { return }
                            PrometheusExporter.FixedFamily.appendLine(
                                to: page, name: family.name, labels: PrometheusExporter.PerMetricFamily.labels(of: one.pointee),
                                value: value)
                        }
                    }
                }
            }
        }
        return page
    }
}
