import Ringside
import RingsideAggregation

// Each of a series' figures (``SeriesSnapshot/Fields``, documented there), read from its shared
// storage (a box, or its place in a block) and written in this copy alone (a box of its own).
// Spelled out, one property each, rather than looked up through key paths
// (`@dynamicMemberLookup`): a key path is made and projected at run time at every read, which
// took half the time of building a snapshot of a million series and a fifth of rendering their
// page.
extension SeriesSnapshot {
    @inlinable package var cumulativeExactSum: UInt128 {
        get { storage.fields[place].cumulativeExactSum }
        _modify {
            makeUnique()
            yield &storage.fields[0].cumulativeExactSum
        }
    }
    @inlinable package var cumulativeMax: Int128 {
        get { storage.fields[place].cumulativeMax }
        _modify {
            makeUnique()
            yield &storage.fields[0].cumulativeMax
        }
    }
    @inlinable package var ring: String {
        get { storage.fields[place].ring }
        _modify {
            makeUnique()
            yield &storage.fields[0].ring
        }
    }
    @inlinable package var metric: MetricDescriptor {
        get { storage.fields[place].metric }
        _modify {
            makeUnique()
            yield &storage.fields[0].metric
        }
    }
    /// The metric's gauge merge, read in place: the drain asks it of every gauge record, and the
    /// whole descriptor's copy retained its strings.
    @inlinable package var gaugeMerge: GaugeMerge { storage.fields[place].metric.gaugeMerge }
    @inlinable package var id: UInt64 {
        get { storage.fields[place].id }
        _modify {
            makeUnique()
            yield &storage.fields[0].id
        }
    }
    @inlinable package var version: UInt64 {
        get { storage.fields[place].version }
        _modify {
            makeUnique()
            yield &storage.fields[0].version
        }
    }
    @inlinable package var wholeVersion: UInt64 {
        get { storage.fields[place].wholeVersion }
        _modify {
            makeUnique()
            yield &storage.fields[0].wholeVersion
        }
    }
    @inlinable package var windows: [WindowStats] {
        get { storage.fields[place].windows }
        _modify {
            makeUnique()
            yield &storage.fields[0].windows
        }
    }
    @inlinable package var lastValue: Double? {
        get { storage.fields[place].lastValue }
        _modify {
            makeUnique()
            yield &storage.fields[0].lastValue
        }
    }
    @inlinable package var cumulativeCount: UInt64 {
        get { storage.fields[place].cumulativeCount }
        _modify {
            makeUnique()
            yield &storage.fields[0].cumulativeCount
        }
    }
    @inlinable package var cumulativeSum: Double {
        get { storage.fields[place].cumulativeSum }
        _modify {
            makeUnique()
            yield &storage.fields[0].cumulativeSum
        }
    }
    @inlinable package var cumulativeSignedSum: Int128 {
        get { storage.fields[place].cumulativeSignedSum }
        _modify {
            makeUnique()
            yield &storage.fields[0].cumulativeSignedSum
        }
    }
    @inlinable package var droppedRecords: UInt64 {
        get { storage.fields[place].droppedRecords }
        _modify {
            makeUnique()
            yield &storage.fields[0].droppedRecords
        }
    }
    @inlinable package var droppedSum: Int128 {
        get { storage.fields[place].droppedSum }
        _modify {
            makeUnique()
            yield &storage.fields[0].droppedSum
        }
    }
    @inlinable package var droppedMax: Int128 {
        get { storage.fields[place].droppedMax }
        _modify {
            makeUnique()
            yield &storage.fields[0].droppedMax
        }
    }
    @inlinable package var sampledRecords: UInt64 {
        get { storage.fields[place].sampledRecords }
        _modify {
            makeUnique()
            yield &storage.fields[0].sampledRecords
        }
    }
    @inlinable package var clampedValues: UInt64 {
        get { storage.fields[place].clampedValues }
        _modify {
            makeUnique()
            yield &storage.fields[0].clampedValues
        }
    }
    @inlinable package var exemplarsRefused: UInt64 {
        get { storage.fields[place].exemplarsRefused }
        _modify {
            makeUnique()
            yield &storage.fields[0].exemplarsRefused
        }
    }
    @inlinable package var control: UInt32 {
        get { storage.fields[place].control }
        _modify {
            makeUnique()
            yield &storage.fields[0].control
        }
    }
    @inlinable package var bucketExemplars: [KeptExemplar] {
        get { storage.fields[place].bucketExemplars }
        _modify {
            makeUnique()
            yield &storage.fields[0].bucketExemplars
        }
    }
}
