function y = fir_filter(h, x)
  % an FIR filter: y(t) = sum_k h(k) x(t-k+1)
  % test inputs: h=randn(4,1) x=randn(20,1)
  %#linview dynamic x
  n = length(x);
  y = h(1) * x;
  for k = 2:length(h)
    y = y + h(k) * [zeros(k - 1, 1); x(1:n - k + 1)];
  end
end
