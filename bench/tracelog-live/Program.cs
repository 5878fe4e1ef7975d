// TraceLogLive PID SECONDS OUT.tsv: attaches TraceEvent's TraceLog to a running
// .NET process live (TraceLog.CreateFromEventPipeSession, the rundown at the
// attach enabled), with the providers pdbsym profile asks for, walks every
// SampleProfiler sample's stack and takes each frame's method name, and every
// 10 s appends "seconds<TAB>rss_bytes<TAB>managed_heap_bytes<TAB>samples<TAB>frames"
// to OUT.tsv.  Runs SECONDS (0: until killed), then stops the session.
using System;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Diagnostics.NETCore.Client;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;

static class Program
{
    static readonly Guid SampleProfiler = new Guid("3c530d44-97ae-513a-1e6d-783e8f8e03a9");
    static long samples, frames;

    static int Main(string[] args)
    {
        int pid = int.Parse(args[0]);
        double seconds = double.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture);
        string outPath = args[2];
        var providers = new[]
        {
            new EventPipeProvider("Microsoft-DotNETCore-SampleProfiler", EventLevel.Verbose),
            // Loader | Jit | NGen | JittedMethodILToNativeMap, as pdbsym's main session
            new EventPipeProvider("Microsoft-Windows-DotNETRuntime", EventLevel.Verbose, 0x20038),
        };
        var client = new DiagnosticsClient(pid);
        using var session = client.StartEventPipeSession(providers, requestRundown: false, circularBufferMB: 64);
        using var source = TraceLog.CreateFromEventPipeSession(session, TraceLog.EventPipeRundownConfiguration.Enable(client));
        source.AllEvents += ev =>
        {
            if (ev.ProviderGuid != SampleProfiler)
                return;
            Interlocked.Increment(ref samples);
            for (TraceCallStack cs = ev.CallStack(); cs != null; cs = cs.Caller)
            {
                GC.KeepAlive(cs.CodeAddress.FullMethodName);
                Interlocked.Increment(ref frames);
            }
        };
        var processing = Task.Factory.StartNew(source.Process, TaskCreationOptions.LongRunning);
        var watch = Stopwatch.StartNew();
        using (var w = new StreamWriter(outPath, append: false) { AutoFlush = true })
        {
            w.WriteLine("seconds\trss_bytes\tmanaged_heap_bytes\tsamples\tframes");
            while (seconds <= 0 || watch.Elapsed.TotalSeconds < seconds)
            {
                Thread.Sleep(10000);
                using var me = Process.GetCurrentProcess();
                w.WriteLine("{0:F0}\t{1}\t{2}\t{3}\t{4}", watch.Elapsed.TotalSeconds, me.WorkingSet64,
                            GC.GetTotalMemory(false), Interlocked.Read(ref samples), Interlocked.Read(ref frames));
                if (processing.IsCompleted)
                    break;
            }
        }
        session.Stop();
        processing.Wait(TimeSpan.FromSeconds(30));
        return 0;
    }
}
