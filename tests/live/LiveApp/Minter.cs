using System;
using System.Linq.Expressions;
using System.Runtime.CompilerServices;
using System.Reflection.Emit;
using System.Text.RegularExpressions;
using System.Threading;

namespace Live.App.Minting
{
    // New methods every second, dropped after use so the runtime can unload
    // them: a DynamicMethod, a compiled Regex and a compiled expression tree,
    // each different from the last (new constants, new patterns).
    internal static class Minter
    {
        public static long Made;

        public static void Run()
        {
            int round = 0;
            while (!Program.Stop)
            {
                round++;
                // a new stack shape each second: the minted code under 1 to 40 frames of Nest
                int depth = 1 + round % 40;
                long sum = Nest(depth, () => Dynamic(round)) + Nest(depth, () => RegexCount(round)) +
                           Nest(depth, () => Expr(round));
                Interlocked.Add(ref Made, 3);
                GC.KeepAlive(sum);
                if (round % 10 == 0)
                    GC.Collect();
                Thread.Sleep(1000);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static long Nest(int depth, Func<long> f) => depth == 0 ? f() : Nest(depth - 1, f) + 1;

        private static long Dynamic(int k)
        {
            var dm = new DynamicMethod("minted_" + k, typeof(long), new[] { typeof(long) });
            var il = dm.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldc_I8, (long)k);
            il.Emit(OpCodes.Mul);
            il.Emit(OpCodes.Ret);
            var f = (Func<long, long>)dm.CreateDelegate(typeof(Func<long, long>));
            long s = 0;
            for (int i = 0; i < 200000; i++)
                s += f(i);
            return s;
        }

        private static long RegexCount(int k)
        {
            var re = new Regex("a{" + (k % 7 + 1) + "}b" + k, RegexOptions.Compiled);
            long n = 0;
            string text = new string('a', 50) + "b" + k;
            for (int i = 0; i < 2000; i++)
                n += re.Matches(text).Count;
            return n;
        }

        private static long Expr(int k)
        {
            var x = Expression.Parameter(typeof(long), "x");
            var body = Expression.Add(Expression.Multiply(x, Expression.Constant((long)k)), Expression.Constant((long)(k * 7)));
            var f = Expression.Lambda<Func<long, long>>(body, x).Compile();
            long s = 0;
            for (int i = 0; i < 200000; i++)
                s += f(i);
            return s;
        }
    }
}
