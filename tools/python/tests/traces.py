"""Readers of the trace files ringside writes (ringside-dump postmortem, the collector's captures),
shared by their tests: the Perfetto protobuf trace (.pftrace) decoded with the protos PyPI's
`perfetto` ships (perfetto_trace_pb2, None when it is not installed), and the interval log (.hlog)
read by HdrHistogram's own Python package (PyPI's `hdrhistogram`)."""

from conftest import missing

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2
except ImportError:
    perfetto_trace_pb2 = None

try:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
except ImportError:
    HdrHistogram = None



def slices_of_values(slices, metric, threads, values, exemplars):
    """The slices of `metric`, checked against what each thread recorded: every value a slice of
    its thread (`values`: each thread's values, sorted), its duration the value in ns exactly, and
    each exemplar (`exemplars`: value -> order id) an argument of its value's slice."""
    fills = [entry for entry in slices if entry[1] == metric]
    assert len(fills) == sum(len(values[name]) for name in threads)
    for name in threads:
        assert sorted(duration for track, _, _, duration, _ in fills if thread_of(track) == name) == values[name]
    found = {duration: args["exemplar.order_id"] for _, _, _, duration, args in fills if "exemplar.order_id" in args}
    assert found == exemplars
    assert all(args["value"] == f"{duration} ns" for _, _, _, duration, args in fills)
    return fills

def require_perfetto():
    """Fails under CI=true, else skips, when the perfetto package is not installed."""
    if perfetto_trace_pb2 is None:
        missing("the perfetto package is not installed (pip install perfetto protobuf)")


def require_hdrhistogram():
    """Fails under CI=true, else skips, when the hdrhistogram package is not installed."""
    if HdrHistogram is None:
        missing("the hdrhistogram package is not installed (pip install hdrhistogram)")


def read_hlog(path):
    """Each tag's total count and largest value over the interval log's histograms, as
    HdrHistogram's own reader reads them."""
    reader = HistogramLogReader(str(path), HdrHistogram(1, 2**63 - 1, 3))
    totals, maxima = {}, {}
    while (histogram := reader.get_next_interval_histogram()) is not None:
        tag = histogram.get_tag()
        totals[tag] = totals.get(tag, 0) + histogram.get_total_count()
        maxima[tag] = max(maxima.get(tag, 0), histogram.get_max_value())
    reader.close()
    return totals, maxima


def thread_of(track_name):
    """The thread a row's track belongs to: "NAME #2" is NAME's second row (overlapping slices)."""
    base, _, row = track_name.rpartition(" #")
    return base if base and row.isdigit() else track_name


def read_pftrace(path):
    """The trace's tracks by uuid, its slices (track name, name, start, duration, args) and its
    counter samples, read as a reader does: events in time order (stably), each end closing the
    slice begun last on its track."""
    trace = perfetto_trace_pb2.Trace()
    with open(path, "rb") as file:
        trace.ParseFromString(file.read())
    tracks = {packet.track_descriptor.uuid: packet.track_descriptor for packet in trace.packet
              if packet.HasField("track_descriptor")}
    events = sorted((packet for packet in trace.packet if packet.HasField("track_event")), key=lambda packet: packet.timestamp)
    open_slices, slices, counters = {}, [], []
    for packet in events:
        event = packet.track_event
        if event.type == perfetto_trace_pb2.TrackEvent.TYPE_SLICE_BEGIN:
            args = {annotation.name: annotation.string_value for annotation in event.debug_annotations}
            open_slices.setdefault(event.track_uuid, []).append((event.name, packet.timestamp, args))
        elif event.type == perfetto_trace_pb2.TrackEvent.TYPE_SLICE_END:
            name, start, args = open_slices[event.track_uuid].pop()
            slices.append((tracks[event.track_uuid].name, name, start, packet.timestamp - start, args))
        elif event.type == perfetto_trace_pb2.TrackEvent.TYPE_COUNTER:
            counters.append((tracks[event.track_uuid].name, packet.timestamp, event.double_counter_value))
    assert not any(open_slices.values()), "a slice begun and never ended"
    return tracks, slices, counters
