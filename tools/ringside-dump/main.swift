// ringside-dump: inspect Ringside rings (list, info, records, watch, stats, check, clean).
// The work lives in RingsideTools, where the tests reach it.
import RingsideTools

DumpTool.main()
