import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Synchronization

/// Raises this process's soft descriptor limit to at least `wanted` (as far as the hard limit
/// allows, raising that too when we may); returns the soft limit now in force.
@discardableResult
func raiseDescriptorLimit(to wanted: rlim_t) -> rlim_t {
    var limit = rlimit()
    getrlimit(RLIMIT_NOFILE_VALUE, &limit)
    guard limit.rlim_cur < wanted else { return limit.rlim_cur }
    var raised = limit
    raised.rlim_cur = wanted
    raised.rlim_max = max(limit.rlim_max, wanted)
    if setrlimit(RLIMIT_NOFILE_VALUE, &raised) != 0 {
        raised.rlim_max = limit.rlim_max
        raised.rlim_cur = min(wanted, limit.rlim_max)
        setrlimit(RLIMIT_NOFILE_VALUE, &raised)
    }
    getrlimit(RLIMIT_NOFILE_VALUE, &limit)
    return limit.rlim_cur
}

#if os(Linux)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif
