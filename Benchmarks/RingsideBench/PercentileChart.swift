import RingsideJSON
import RingsideText
#if canImport(Glibc)
import Glibc
#endif

/// An SVG chart of latency percentile curves: x is the percentile on a "nines" scale
/// (-log10(1 - p): 90 %, 99 %, 99.9 % evenly spaced), y is ns per call on a log scale; one line
/// per row. Self-contained (no scripts, no external fonts), for docs/benchmarks.md.
package struct PercentileChart {
    package var title: String
    package var subtitle: String
    package var rows: [LatencySummary]

    package init(title: String, subtitle: String, rows: [LatencySummary]) {
        self.title = title
        self.subtitle = subtitle
        self.rows = rows
    }

    /// One colour per emit row (twelve).
    static let palette = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
        "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#8c6d31",
    ]

    package var svg: String {
        let width = 820.0, height = 460.0
        let left = 70.0, right = 190.0, top = 56.0, bottom = 50.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let points = rows.flatMap(\.curve)
        // Rounded first: 1 - 10^-5 comes back as 5.0000000001 nines.
        let maxNines = max(1, ((points.map { Percentiles.nines($0.percentile) }.max() ?? 1) * 1000).rounded() / 1000)
            .rounded(.up)
        let positive = points.map(\.nanoseconds).filter { $0 > 0 }
        let lowDecade = floor(log10(max(positive.min() ?? 1, 0.1)))
        let highDecade = max(lowDecade + 1, ceil(log10(max(positive.max() ?? 10, 1))))
        func x(_ p: Double) -> Double { left + Percentiles.nines(p) / maxNines * plotWidth }
        func y(_ ns: Double) -> Double {
            let clamped = max(ns, pow(10, lowDecade))
            return top + (highDecade - log10(clamped)) / (highDecade - lowDecade) * plotHeight
        }
        func f(_ v: Double) -> String { JSON.figureText((v * 10).rounded() / 10) }

        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" \
            viewBox="0 0 \(f(width)) \(f(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(f(left))" y="22" font-size="15" font-weight="bold">\(Self.escape(title))</text>
            <text x="\(f(left))" y="40" fill="#555">\(Self.escape(subtitle))</text>

            """
        // Grid: decades of ns, and each nine of percentile.
        var decade = lowDecade
        while decade <= highDecade {
            let yy = y(pow(10, decade))
            out += "<line x1=\"\(f(left))\" y1=\"\(f(yy))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(yy))\" stroke=\"#ddd\"/>\n"
            out += "<text x=\"\(f(left - 8))\" y=\"\(f(yy + 4))\" text-anchor=\"end\">\(nanosLabel(pow(10, decade)))</text>\n"
            decade += 1
        }
        for nine in 0...Int(maxNines) {
            let p = 1 - pow(10, -Double(nine))
            let xx = x(p)
            out += "<line x1=\"\(f(xx))\" y1=\"\(f(top))\" x2=\"\(f(xx))\" y2=\"\(f(top + plotHeight))\" stroke=\"#ddd\"/>\n"
            out += "<text x=\"\(f(xx))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">\(Self.percentLabel(nine))</text>\n"
        }
        out += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 8))\" text-anchor=\"middle\">percentile</text>\n"
        out += "<text transform=\"translate(16 \(f(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">ns per call (log)</text>\n"
        out +=
            "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotWidth))\" height=\"\(f(plotHeight))\" fill=\"none\" stroke=\"#999\"/>\n"
        for (index, row) in rows.enumerated() where !row.curve.isEmpty {
            let color = Self.palette[index % Self.palette.count]
            let path = row.curve.map { "\(f(x($0.percentile))),\(f(y($0.nanoseconds)))" }.joined(separator: " ")
            out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
            let legendY = top + 10 + Double(index) * 20
            out +=
                "<line x1=\"\(f(width - right + 14))\" y1=\"\(f(legendY))\" x2=\"\(f(width - right + 38))\" "
                + "y2=\"\(f(legendY))\" stroke=\"\(color)\" stroke-width=\"3\"/>\n"
            out += "<text x=\"\(f(width - right + 44))\" y=\"\(f(legendY + 4))\">\(Self.escape(row.name))</text>\n"
        }
        out += "</svg>\n"
        return out
    }

    static func percentLabel(_ nines: Int) -> String {
        switch nines {
        case ...0: return "0 %"
        case 1: return "90 %"
        case 2: return "99 %"
        default: return "99." + String(repeating: "9", count: nines - 2) + " %"
        }
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
