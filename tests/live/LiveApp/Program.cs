using System;
using System.Threading;
using System.Threading.Tasks;

namespace Live.App
{
    // LiveApp [SECONDS] [--mint]: runs its workloads for SECONDS (default:
    // until killed), printing "ready PID" once started.  With --mint it also
    // makes new methods every second (DynamicMethod, compiled Regex,
    // expression trees) and drops them, so the runtime unloads them.
    // With --light its busy threads work a third of the time and sleep the
    // rest (the tests run several apps at once beside other tests; the
    // benchmarks leave it out).
    // LiveApp --bench SECONDS THREADS: a CPU-bound benchmark for
    // bench/run-profile-cost.sh: prints "ready PID", waits for a line on
    // stdin (the profiler attached), runs THREADS threads of the compute
    // workload for SECONDS and prints "rounds N seconds S".
    public static class Program
    {
        public static volatile bool Stop;

        public static int Main(string[] args)
        {
            if (args.Length > 0 && args[0] == "--bench")
                return Bench(double.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture), int.Parse(args[2]));
            double seconds = 0;
            if (args.Length > 0 && !args[0].StartsWith("--"))
                seconds = double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture);
            bool mint = Array.IndexOf(args, "--mint") >= 0;
            Workers.Light = Array.IndexOf(args, "--light") >= 0;
            var threads = new[]
            {
                new Thread(Workers.Compute) { Name = "compute", IsBackground = true },
                new Thread(Workers.Waiter) { Name = "waiter", IsBackground = true },
            };
            foreach (var t in threads)
                t.Start();
            var asyncLoop = Task.Run(() => Workers.AsyncLoop());
            Thread minter = null;
            if (mint)
            {
                minter = new Thread(Minting.Minter.Run) { Name = "minter", IsBackground = true };
                minter.Start();
            }
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            if (seconds > 0)
                Thread.Sleep(TimeSpan.FromSeconds(seconds));
            else
                Thread.Sleep(Timeout.Infinite);
            Stop = true;
            return 0;
        }

        private static int Bench(double seconds, int threads)
        {
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            Console.In.ReadLine();
            long rounds = 0;
            var watch = System.Diagnostics.Stopwatch.StartNew();
            var workers = new Thread[threads];
            for (int i = 0; i < threads; i++)
            {
                workers[i] = new Thread(() =>
                {
                    long mine = 0;
                    while (watch.Elapsed.TotalSeconds < seconds)
                    {
                        Workers.Round();
                        mine++;
                    }
                    Interlocked.Add(ref rounds, mine);
                });
                workers[i].Start();
            }
            foreach (var t in workers)
                t.Join();
            Console.WriteLine("rounds " + rounds + " seconds " + watch.Elapsed.TotalSeconds.ToString("F3", System.Globalization.CultureInfo.InvariantCulture));
            return 0;
        }
    }
}
