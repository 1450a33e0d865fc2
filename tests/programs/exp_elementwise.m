function [S, s] = exp_elementwise(X, a)
  % Taylor terms x^k / k! elementwise, and of a scalar
  % test inputs: X=randn(5,4) a=0.3
  S = zeros(size(X));
  s = 0;
  for k = 0:6
    S = S + X .^ k / factorial(k);
    s = s + a^k / factorial(k);
  end
end
