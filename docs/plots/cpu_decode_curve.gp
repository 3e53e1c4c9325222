# The CPU decode curve (kvforge bench decode-curve): gnuplot docs/plots/cpu_decode_curve.gp
# (from the repository root), reading docs/plots/cpu_decode_curve.dat. Runs a and b share a colour.
set terminal pngcairo size 800,450 font 'sans,10' noenhanced
set output 'docs/plots/cpu_decode_curve.png'
set title 'CPU decode time per token, gpt2-124m f32 weights, 2 threads (decode-curve, 2026-11-29)'
set xlabel 'context (tokens)'
set ylabel 'ms per generated token (log scale)'
set logscale xy 2
set logscale y 10
set xtics (512, 1024, 2048, 4096)
set xrange [400:5200]
set grid
set key at graph 0.98, graph 0.62 right top font ',9'
f = 'docs/plots/cpu_decode_curve.dat'
plot f using 1:2 with linespoints lc 1 lw 2 pt 7 title 'naive (a)', \
     f using 1:3 with linespoints lc 1 dt 2 pt 6 title 'naive (b)', \
     f using 1:4 with linespoints lc 2 lw 2 pt 5 title 'cached, unfused (a)', \
     f using 1:5 with linespoints lc 2 dt 2 pt 4 title 'cached, unfused (b)', \
     f using 1:6 with linespoints lc 3 lw 2 pt 9 title 'cached+fused, f32 KV (a)', \
     f using 1:7 with linespoints lc 3 dt 2 pt 8 title 'cached+fused, f32 KV (b)', \
     f using 1:8 with linespoints lc 4 lw 2 pt 13 title 'cached+fused, f16 KV'
