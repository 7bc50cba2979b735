import RingsideExport

/// A ``TraceModel`` in Perfetto's protobuf trace format (`perfetto.protos.Trace`): a
/// `TrackDescriptor` per process, thread row and counter track, then the events in time order on
/// one packet sequence: a `TrackEvent` per slice's begin and end (each row's slices nest, so an
/// end closes the slice begun last there) and per counter sample. Times are the model's
/// (nanoseconds after its origin). Field numbers are those of Perfetto's protos
/// (protos/perfetto/trace/trace_packet.proto, track_event/track_descriptor.proto,
/// track_event/track_event.proto, track_event/debug_annotation.proto).
package enum PerfettoTrace {
    /// `TrackEvent.Type`.
    enum EventType: UInt64 {
        case sliceBegin = 1
        case sliceEnd = 2
        case counter = 4
    }

    /// An event to write: a slice's begin (with the slice) or end, or a counter sample.
    enum Event {
        case begin(TraceModel.Slice)
        case end
        case sample(TraceModel.CounterSample)
    }

    static let sequenceID: UInt64 = 1

    package static func encode(_ model: TraceModel) -> [UInt8] {
        var trace = ProtobufWriter()
        let pids = ChromeTraceJSON.traceIDs(model)
        // Track uuids: a process's is its index + 1; thread rows' and counters' follow them all.
        var next = UInt64(model.processes.count) + 1
        var rowUUIDs: [String: UInt64] = [:]
        var counterUUIDs: [String: UInt64] = [:]
        for (index, (process, pid)) in zip(model.processes, pids).enumerated() {
            let processUUID = UInt64(index) + 1
            descriptor(&trace) { track in
                track.uint64(1, processUUID)  // uuid
                track.message(3) { descriptor in  // process
                    descriptor.uint64(1, UInt64(UInt32(bitPattern: pid)))  // pid
                    descriptor.string(6, process.name)  // process_name
                }
            }
            for thread in process.threads {
                for row in 0..<thread.rows {
                    rowUUIDs["\(process.source)/\(thread.lane)/\(row)"] = next
                    descriptor(&trace) { track in
                        track.uint64(1, next)
                        track.string(2, thread.name(row: row))  // name
                        track.uint64(5, processUUID)  // parent_uuid
                    }
                    next += 1
                }
            }
        }
        for track in model.counterTracks {
            counterUUIDs["\(track.source)/\(track.name)"] = next
            descriptor(&trace) { descriptor in
                descriptor.uint64(1, next)
                descriptor.string(2, track.name)
                descriptor.uint64(5, UInt64(track.source) + 1)
                descriptor.message(8) { _ in }  // counter: a CounterDescriptor, empty
            }
            next += 1
        }
        for (time, uuid, event) in events(model, rowUUIDs: rowUUIDs, counterUUIDs: counterUUIDs) {
            trace.message(1) { packet in  // Trace.packet
                packet.uint64(8, time)  // timestamp
                packet.uint64(10, sequenceID)  // trusted_packet_sequence_id
                packet.message(11) { track in  // track_event
                    switch event {
                    case let .begin(slice):
                        track.uint64(9, EventType.sliceBegin.rawValue)  // type
                        track.uint64(11, uuid)  // track_uuid
                        track.string(22, "ringside")  // categories
                        track.string(23, slice.name)  // name
                        for arg in slice.args {
                            track.message(4) { annotation in  // debug_annotations
                                annotation.string(10, arg.key)  // name
                                annotation.string(6, arg.value)  // string_value
                            }
                        }
                    case .end:
                        track.uint64(9, EventType.sliceEnd.rawValue)
                        track.uint64(11, uuid)
                    case let .sample(sample):
                        track.uint64(9, EventType.counter.rawValue)
                        track.uint64(11, uuid)
                        track.double(44, sample.value.doubleValue)  // double_counter_value
                    }
                }
            }
        }
        return trace.bytes
    }

    /// Every event in time order (stable: at one time, in the order each track needs them). Each
    /// row's slices, longer first at one start, begin after the ends of those that ended by then,
    /// innermost first: a reader that sorts by time (stably) pairs each end with its begin.
    static func events(
        _ model: TraceModel, rowUUIDs: [String: UInt64], counterUUIDs: [String: UInt64]
    ) -> [(time: UInt64, uuid: UInt64, event: Event)] {
        var events: [(time: UInt64, uuid: UInt64, event: Event)] = []
        var open: [UInt64: [UInt64]] = [:]  // by row uuid: the ends of its open slices, innermost last
        let slices = model.slices.sorted { ($0.startNanos, UInt64.max - $0.durationNanos) < ($1.startNanos, UInt64.max - $1.durationNanos) }
        for slice in slices {
            let uuid = rowUUIDs["\(slice.source)/\(slice.lane)/\(slice.row)"] ?? 0
            while let end = open[uuid]?.last, end <= slice.startNanos {
                events.append((end, uuid, .end))
                open[uuid]!.removeLast()
            }
            events.append((slice.startNanos, uuid, .begin(slice)))
            open[uuid, default: []].append(slice.startNanos + slice.durationNanos)
        }
        for (uuid, ends) in open {
            for end in ends.reversed() { events.append((end, uuid, .end)) }
        }
        for sample in model.counters {
            events.append((sample.timeNanos, counterUUIDs["\(sample.source)/\(sample.name)"] ?? 0, .sample(sample)))
        }
        return events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// A `TracePacket` in `Trace.packet` (1) holding a `track_descriptor` (60) written by `body`.
    private static func descriptor(_ trace: inout ProtobufWriter, _ body: (inout ProtobufWriter) -> Void) {
        trace.message(1) { packet in
            packet.uint64(10, sequenceID)  // trusted_packet_sequence_id
            packet.message(60, body)
        }
    }
}
