function [x, iters] = fixed_point(A, b)
  % the fixed point of x = A x + b by a convergence loop (re-evaluated as a whole)
  % test inputs: A=contraction(5) b=randn(5,1)
  x = b;
  iters = 0;
  dx = 1;
  while dx > 1e-13 && iters < 500
    xn = A * x + b;
    dx = norm(xn - x, Inf);
    x = xn;
    iters = iters + 1;
  end
end
