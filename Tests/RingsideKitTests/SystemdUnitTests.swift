import Foundation
import Testing

@Suite("the systemd unit")
struct SystemdUnitTests {
    @Test("the unit file names its hardening lines, keeps /dev/shm shared, and explains RemoveIPC (read from the file, not run)")
    func unitFileNamesItsHardening() throws {
        let text = try String(contentsOfFile: kitFile("tools/systemd/ringside-collector.service"), encoding: .utf8)
        let settings = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("=") }.map(String.init))
        for line in [
            "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/dev/shm", "ProtectHome=yes",
            "PrivateTmp=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "MemoryDenyWriteExecute=yes",
            "SystemCallFilter=@system-service", "RemoveIPC=no", "CapabilityBoundingSet=",
        ] {
            #expect(settings.contains(line), "missing \(line)")
        }
        // A private /dev would hide the bots' rings.
        #expect(!settings.contains("PrivateDevices=yes"))
        #expect(settings.contains { $0.hasPrefix("User=") })
        #expect(settings.contains { $0.hasPrefix("ExecStart=/usr/local/bin/ringside-collector") })
        #expect(text.contains("RemoveIPC") && text.contains("logind"))
    }
}
