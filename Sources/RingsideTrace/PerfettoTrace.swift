import RingsideExport

/// A ``TraceModel`` in Perfetto's protobuf trace format (`perfetto.protos.Trace`): a
/// `TrackDescriptor` per process, thread and counter track, then a `TrackEvent` per slice's
/// begin and end and per counter sample, on one packet sequence. Times are the model's
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

    static let sequenceID: UInt64 = 1

    package static func encode(_ model: TraceModel) -> [UInt8] {
        var trace = ProtobufWriter()
        let pids = ChromeTraceJSON.traceIDs(model)
        // Track uuids: a process's is its index + 1; a thread's and a counter's follow them all.
        var next = UInt64(model.processes.count) + 1
        var threadUUIDs: [String: UInt64] = [:]
        var counterUUIDs: [String: UInt64] = [:]
        for (index, (process, pid)) in zip(model.processes, pids).enumerated() {
            let processUUID = UInt64(index) + 1
            packet(&trace, timestamp: nil) { packet in
                packet.message(60) { track in  // track_descriptor
                    track.uint64(1, processUUID)  // uuid
                    track.message(3) { descriptor in  // process
                        descriptor.uint64(1, UInt64(UInt32(bitPattern: pid)))  // pid
                        descriptor.string(6, process.name)  // process_name
                    }
                }
            }
            for thread in process.threads {
                threadUUIDs["\(process.source)/\(thread.lane)"] = next
                packet(&trace, timestamp: nil) { packet in
                    packet.message(60) { track in
                        track.uint64(1, next)
                        track.string(2, thread.name)  // name
                        track.uint64(5, processUUID)  // parent_uuid
                    }
                }
                next += 1
            }
        }
        for track in model.counterTracks {
            counterUUIDs["\(track.source)/\(track.name)"] = next
            packet(&trace, timestamp: nil) { packet in
                packet.message(60) { descriptor in
                    descriptor.uint64(1, next)
                    descriptor.string(2, track.name)
                    descriptor.uint64(5, UInt64(track.source) + 1)
                    descriptor.message(8) { _ in }  // counter: a CounterDescriptor, empty
                }
            }
            next += 1
        }
        for slice in model.slices {
            let uuid = threadUUIDs["\(slice.source)/\(slice.lane)"] ?? 0
            packet(&trace, timestamp: slice.startNanos) { packet in
                packet.message(11) { event in  // track_event
                    event.uint64(9, EventType.sliceBegin.rawValue)  // type
                    event.uint64(11, uuid)  // track_uuid
                    event.string(22, "ringside")  // categories
                    event.string(23, slice.name)  // name
                    for arg in slice.args {
                        event.message(4) { annotation in  // debug_annotations
                            annotation.string(10, arg.key)  // name
                            annotation.string(6, arg.value)  // string_value
                        }
                    }
                }
            }
            packet(&trace, timestamp: slice.startNanos + slice.durationNanos) { packet in
                packet.message(11) { event in
                    event.uint64(9, EventType.sliceEnd.rawValue)
                    event.uint64(11, uuid)
                }
            }
        }
        for sample in model.counters {
            let uuid = counterUUIDs["\(sample.source)/\(sample.name)"] ?? 0
            packet(&trace, timestamp: sample.timeNanos) { packet in
                packet.message(11) { event in
                    event.uint64(9, EventType.counter.rawValue)
                    event.uint64(11, uuid)
                    event.double(44, sample.value.doubleValue)  // double_counter_value
                }
            }
        }
        return trace.bytes
    }

    /// A `TracePacket` in `Trace.packet` (1): its timestamp (8) when it has one, the sequence (10), then `body`.
    private static func packet(_ trace: inout ProtobufWriter, timestamp: UInt64?, _ body: (inout ProtobufWriter) -> Void) {
        trace.message(1) { packet in
            if let timestamp { packet.uint64(8, timestamp) }
            packet.uint64(10, sequenceID)  // trusted_packet_sequence_id
            body(&packet)
        }
    }
}
