#if canImport(Glibc)
import Glibc
#endif

/// How the C allocator keeps memory between requests.
enum MemoryAllocator {
    /// Keeps large blocks in the process between requests instead of handing them back to
    /// the kernel as soon as they are freed.
    ///
    /// A page of messages of a large group handles buffers of megabytes (the database's
    /// answer, its copy, the JSON written): by default glibc maps each such block afresh and
    /// unmaps it when freed, so every request paid for zeroing and faulting in its memory
    /// again (about a seventh of the service's time on such a page). With these thresholds
    /// blocks up to 32 MiB come from the allocator's heap, and it gives memory back to the
    /// kernel only once 128 MiB lie free at its top.
    ///
    /// An operator who tunes malloc with `GLIBC_TUNABLES` keeps their settings.
    static func keepLargeBlocks(_ environment: Environment) {
        #if canImport(Glibc)
        guard !(environment.variables["GLIBC_TUNABLES"] ?? "").contains("glibc.malloc.") else { return }
        // `mallopt` is declared in <malloc.h>, which the Glibc module leaves out: looked up
        // by name (a null handle is RTLD_DEFAULT), with the parameter numbers of <malloc.h>.
        guard let symbol = dlsym(nil, "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        let trimThreshold: Int32 = -1, mmapThreshold: Int32 = -3
        _ = mallopt(mmapThreshold, 32 << 20)
        _ = mallopt(trimThreshold, 128 << 20)
        #endif
    }
}
