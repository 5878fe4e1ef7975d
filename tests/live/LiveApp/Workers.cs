using System;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Live.Lib.Geometry;

namespace Live.App
{
    internal static class Workers
    {
        public static bool Light;

        public static void Compute()
        {
            var watch = System.Diagnostics.Stopwatch.StartNew();
            while (!Program.Stop)
            {
                Round();
                if (Light && watch.ElapsedMilliseconds >= 4)
                {
                    Thread.Sleep(8); // a third of the time at work
                    watch.Restart();
                }
            }
        }

        // one round of the compute workload (also bench/run-profile-cost.sh's unit)
        public static long Round()
        {
            long n = Fib(22);
            n += (long)Shapes.Spin(200);
            n += Squares(2000);
            return n;
        }

        private static int Fib(int k)
        {
            if (k < 2)
                return k;
            return Fib(k - 1) + Fib(k - 2);
        }

        private static long Squares(int count)
        {
            Func<int, long> square = x =>
            {
                long s = 0;
                for (int i = 0; i < 64; i++)
                    s += (long)x * i;
                return s;
            };
            return Enumerable.Range(0, count).Where(x => x % 3 != 0).Select(square).Sum();
        }

        public static void Waiter()
        {
            var gate = new ManualResetEventSlim(false);
            while (!Program.Stop)
                gate.Wait(50);
        }

        public static async Task AsyncLoop()
        {
            long total = 0;
            while (!Program.Stop)
            {
                total += await Chain(3);
                if (Light)
                    await Task.Delay(1);
                else
                    await Task.Yield();
            }
            GC.KeepAlive(total);
        }

        private static async Task<long> Chain(int depth)
        {
            if (depth == 0)
                return Busy(20000);
            await Task.Yield();
            return await Chain(depth - 1) + 1;
        }

        private static long Busy(int rounds)
        {
            long h = 17;
            for (int i = 0; i < rounds; i++)
                h = h * 31 + i;
            return h;
        }
    }
}
