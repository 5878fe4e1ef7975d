// TraceLogBench: what `pdbsym trace` does, done with TraceEvent, for
// bench/run-trace.sh: the .nettrace converted to an .etlx (TraceLog, as
// dotnet-trace convert and PerfView do), then every SampleProfiler sample's
// stack walked, each frame's method name taken and its source line looked up
// once per code address (SymbolReader over PDBDIR); prints samples and frames.
//   TraceLogBench TRACE PDBDIR
using System;
using System.Collections.Generic;
using System.IO;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;

static class Program
{
    static readonly Guid SampleProfiler = new Guid("3c530d44-97ae-513a-1e6d-783e8f8e03a9");

    static int Main(string[] args)
    {
        string etlx = Path.Combine(Path.GetTempPath(), "tracelogbench-" + Environment.ProcessId + ".etlx");
        try
        {
            TraceLog.CreateFromEventPipeDataFile(args[0], etlx);
            long samples = 0, frames = 0, withLine = 0;
            var lines = new Dictionary<int, bool>();
            using (var log = new TraceLog(etlx))
            using (var symbols = new SymbolReader(TextWriter.Null, args[1]))
            {
                symbols.SecurityCheck = _ => true;
                foreach (TraceEvent ev in log.Events)
                {
                    if (ev.ProviderGuid != SampleProfiler) continue;
                    samples++;
                    for (TraceCallStack cs = ev.CallStack(); cs != null; cs = cs.Caller)
                    {
                        frames++;
                        var ca = cs.CodeAddress;
                        string name = ca.FullMethodName;
                        int key = (int)ca.CodeAddressIndex;
                        if (!lines.TryGetValue(key, out bool has))
                        {
                            has = log.CodeAddresses.GetSourceLine(symbols, ca.CodeAddressIndex) != null;
                            lines[key] = has;
                        }
                        if (has) withLine++;
                        GC.KeepAlive(name);
                    }
                }
                Console.WriteLine("samples {0} frames {1} with_line {2} etlx_bytes {3}", samples, frames, withLine,
                                  new FileInfo(etlx).Length);
            }
        }
        finally
        {
            File.Delete(etlx);
        }
        return 0;
    }
}
