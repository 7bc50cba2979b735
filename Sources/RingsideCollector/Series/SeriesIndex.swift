extension BotAggregator {
    /// Where each series is, by metric name and labels, kept by the pair's hash: 8 bytes a series
    /// where the pair itself took 32 (its series' descriptor holds the strings already, and a
    /// million series' table is most of a bot's own memory). An address found by the hash is checked
    /// against the series it leads to; the rare pair whose hash another pair holds is
    /// kept by its strings.
    struct SeriesIndex {
        private var byHash: [Int: SeriesAddress] = [:]
        private var collided: [SeriesKey: SeriesAddress] = [:]
        /// The pair's hash (the tests give one that collides).
        private let hash: @Sendable (SeriesKey) -> Int

        init(hash: @escaping @Sendable (SeriesKey) -> Int = { $0.hashValue }) {
            self.hash = hash
        }

        /// Series kept by their strings, their hash held by another.
        var collisions: Int { collided.count }

        /// The address of the series of `key`, among `tables`.
        func address(for key: SeriesKey, in tables: SeriesTables) -> SeriesAddress? {
            if let address = byHash[hash(key)], Self.leads(address, to: key, in: tables) { return address }
            return collided.isEmpty ? nil : collided[key]
        }

        /// Sets the address of the series of `key` (nil: it has none), which holds no other.
        mutating func set(_ address: SeriesAddress?, for key: SeriesKey, in tables: SeriesTables) {
            let hashed = hash(key)
            if let held = byHash[hashed], !Self.leads(held, to: key, in: tables) {
                collided[key] = address
            } else if collided[key] != nil {
                collided[key] = address
            } else {
                byHash[hashed] = address
            }
        }

        private static func leads(_ address: SeriesAddress, to key: SeriesKey, in tables: SeriesTables) -> Bool {
            let metric = tables.metric(of: address)
            return metric.name == key.name && metric.encodedLabels == key.labels
        }
    }
}
