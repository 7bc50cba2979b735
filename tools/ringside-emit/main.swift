// ringside-emit: write values into a Ringside ring from a script or a pipe.
// The work lives in RingsideTools, where the tests reach it.
import RingsideTools

EmitTool.main()
